// gpufeed — a bounds-checked cursor over protobuf wire format (no libprotobuf, no schema).
//
// Only what gpufeed needs to read Caffe Datum messages: tags, varints, fixed32/64, length-delimited
// fields, and skipping any field (groups included). Every method checks the remaining length
// before it reads and reports failure by returning false with a reason in why(); nothing here
// throws, allocates or reads outside the span it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gpufeed::detail::pb {

enum class wire_type : std::uint8_t {
  varint = 0,
  fixed64 = 1,
  length = 2,
  start_group = 3,
  end_group = 4,
  fixed32 = 5,
};

inline constexpr std::uint32_t max_field_number = (1u << 29) - 1;
// Groups nested deeper than this are refused (protobuf's own default recursion limit is 100).
inline constexpr unsigned max_group_depth = 64;

class wire_reader {
 public:
  explicit wire_reader(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}

  [[nodiscard]] bool done() const noexcept { return pos_ == bytes_.size(); }
  [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  // Why the last failed call failed (a static string).
  [[nodiscard]] const char* why() const noexcept { return why_; }

  // A varint of at most 10 bytes. Bits above 64 in the tenth byte are dropped, as protobuf does.
  bool varint(std::uint64_t& out) noexcept {
    std::uint64_t v = 0;
    for (unsigned n = 0; n < 10; ++n) {
      if (pos_ == bytes_.size()) return fail("truncated varint");
      const auto b = std::to_integer<std::uint8_t>(bytes_[pos_++]);
      v |= static_cast<std::uint64_t>(b & 0x7fu) << (7 * n);
      if ((b & 0x80u) == 0) {
        out = v;
        return true;
      }
    }
    return fail("varint longer than 10 bytes");
  }

  // A field key: field number in [1, 2^29) and a wire type in {0..5}.
  bool tag(std::uint32_t& field, wire_type& type) noexcept {
    std::uint64_t t = 0;
    if (!varint(t)) return false;
    if (t > 0xffffffffu) return fail("field key does not fit 32 bits");
    const auto f = static_cast<std::uint32_t>(t >> 3);
    const auto w = static_cast<unsigned>(t & 7u);
    if (f == 0) return fail("field number 0");
    if (w > 5) return fail("invalid wire type 6 or 7");
    field = f;
    type = static_cast<wire_type>(w);
    return true;
  }

  // The next n bytes (fixed32: n = 4, fixed64: n = 8).
  bool bytes(std::size_t n, std::span<const std::byte>& out) noexcept {
    if (n > remaining()) return fail(n == 4 || n == 8 ? "truncated fixed-width field"
                                                       : "length past the end of the message");
    out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }

  // The payload of a length-delimited field (the length varint is read here).
  bool length_delimited(std::span<const std::byte>& out) noexcept {
    std::uint64_t n = 0;
    if (!varint(n)) return false;
    if (n > remaining()) return fail("length past the end of the message");
    return bytes(static_cast<std::size_t>(n), out);
  }

  // Skips the value of a field whose key (field, type) was just read. A start-group skips up to
  // its matching end-group; a stray end-group is an error.
  bool skip(std::uint32_t field, wire_type type) noexcept {
    if (type == wire_type::end_group) return fail("end-group without a start-group");
    if (type != wire_type::start_group) return skip_scalar(type);
    std::uint32_t open[max_group_depth];
    unsigned depth = 0;
    open[depth++] = field;
    while (depth > 0) {
      std::uint32_t f = 0;
      wire_type t{};
      if (!tag(f, t)) return done() ? fail("unterminated group") : false;
      if (t == wire_type::end_group) {
        if (open[depth - 1] != f) return fail("end-group does not match its start-group");
        --depth;
      } else if (t == wire_type::start_group) {
        if (depth == max_group_depth) return fail("groups nested too deeply");
        open[depth++] = f;
      } else if (!skip_scalar(t)) {
        return false;
      }
    }
    return true;
  }

 private:
  bool skip_scalar(wire_type type) noexcept {
    std::uint64_t v = 0;
    std::span<const std::byte> s;
    switch (type) {
      case wire_type::varint: return varint(v);
      case wire_type::fixed64: return bytes(8, s);
      case wire_type::length: return length_delimited(s);
      case wire_type::fixed32: return bytes(4, s);
      default: return fail("unexpected group marker");
    }
  }
  bool fail(const char* why) noexcept {
    why_ = why;
    return false;
  }

  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  const char* why_ = "";
};

}  // namespace gpufeed::detail::pb
