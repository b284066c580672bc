// Test helper: a small protobuf wire-format encoder for Caffe Datum values. It shares no code with
// gpufeed's parser, so the tests check the parser against an independent encoding.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpufeed::test {

class pb_writer {
 public:
  pb_writer& varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
    return *this;
  }
  pb_writer& key(std::uint32_t field, unsigned wire) {
    return varint((static_cast<std::uint64_t>(field) << 3) | wire);
  }
  // int32 fields: negative values are sign-extended to 64 bits (10 bytes on the wire).
  pb_writer& int32(std::uint32_t field, std::int32_t v) {
    return key(field, 0).varint(static_cast<std::uint64_t>(static_cast<std::int64_t>(v)));
  }
  pb_writer& boolean(std::uint32_t field, bool v) { return key(field, 0).varint(v ? 1 : 0); }
  pb_writer& bytes(std::uint32_t field, const std::string& v) {
    key(field, 2).varint(v.size());
    out_ += v;
    return *this;
  }
  pb_writer& fixed32(std::uint32_t field, std::uint32_t v) {
    key(field, 5);
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  pb_writer& fixed64(std::uint32_t field, std::uint64_t v) {
    key(field, 1);
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  pb_writer& float_unpacked(std::uint32_t field, float f) {
    std::uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    return fixed32(field, u);
  }
  pb_writer& floats_packed(std::uint32_t field, const std::vector<float>& fs) {
    return bytes(field, float_bytes(fs));
  }
  pb_writer& group(std::uint32_t field, const std::string& body) {
    key(field, 3);
    out_ += body;
    return key(field, 4);
  }
  pb_writer& raw(const std::string& s) {
    out_ += s;
    return *this;
  }
  [[nodiscard]] const std::string& str() const { return out_; }

  static std::string float_bytes(const std::vector<float>& fs) {
    std::string s(fs.size() * 4, '\0');
    for (std::size_t i = 0; i < fs.size(); ++i) {
      std::uint32_t u = 0;
      std::memcpy(&u, &fs[i], 4);
      for (int b = 0; b < 4; ++b) s[4 * i + b] = static_cast<char>((u >> (8 * b)) & 0xff);
    }
    return s;
  }

 private:
  std::string out_;
};

// A Datum as Caffe's convert_imageset writes it: channels, height, width, data, label.
inline std::string caffe_datum(int c, int h, int w, const std::string& data, int label,
                               bool encoded = false) {
  pb_writer p;
  p.int32(1, c).int32(2, h).int32(3, w).bytes(4, data).int32(5, label);
  if (encoded) p.boolean(7, true);
  return p.str();
}

}  // namespace gpufeed::test
