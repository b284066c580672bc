// libFuzzer target for gpufeed::parse_datum / copy_datum_payload.
//
// Properties: any byte string either parses, giving views that lie inside the input and a payload
// that copies without error, or is rejected with gpufeed::format_error. Any other exception, an
// out-of-bounds access (ASan) or undefined behaviour (UBSan) is a finding. Where the message has
// no groups, an independent reference parse below (a plain byte walk, sharing no code with
// gpufeed) decides acceptance too, and every parsed field and the payload bytes must equal its.
// Seed files must parse (gpufeed_fuzz_check_seed: the seeds are valid Datums).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "gpufeed/datum.hpp"

namespace {
void require(bool ok) {
  if (!ok) std::abort();
}
bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}
bool same(std::span<const std::byte> a, const std::vector<std::uint8_t>& b) {
  return a.size() == b.size() && (b.empty() || std::memcmp(a.data(), b.data(), b.size()) == 0);
}

// The reference: what caffe.proto's Datum decodes to under protobuf's rules.
struct reference_datum {
  std::int32_t channels = 0, height = 0, width = 0, label = 0;
  bool encoded = false;
  std::vector<std::uint8_t> data, floats;  // floats: every float_data element's 4 bytes, in order
};
enum class verdict { valid, invalid, has_groups };

verdict reference_parse(const std::uint8_t* p, std::size_t size, reference_datum& out) {
  std::size_t at = 0;
  auto varint = [&](std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at >= size) return false;
      const std::uint8_t b = p[at++];
      if (shift < 64) v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;  // more than 10 bytes
  };
  while (at < size) {
    std::uint64_t key = 0;
    if (!varint(key) || key > 0xffffffffu) return verdict::invalid;
    const std::uint64_t field = key >> 3, wire = key & 7;
    if (field == 0 || wire > 5) return verdict::invalid;
    if (wire == 3 || wire == 4) return verdict::has_groups;
    std::uint64_t v = 0;
    const std::uint8_t* bytes = nullptr;
    std::size_t len = 0;
    if (wire == 0) {
      if (!varint(v)) return verdict::invalid;
    } else {
      if (wire == 2) {
        if (!varint(v) || v > size - at) return verdict::invalid;
        len = static_cast<std::size_t>(v);
      } else {
        len = wire == 1 ? 8 : 4;
        if (len > size - at) return verdict::invalid;
      }
      bytes = p + at;
      at += len;
    }
    const bool int_field = field == 1 || field == 2 || field == 3 || field == 5 || field == 7;
    if (int_field) {
      if (wire != 0) return verdict::invalid;
      std::int32_t i = 0;
      const auto low = static_cast<std::uint32_t>(v);
      std::memcpy(&i, &low, 4);
      if (field == 1) out.channels = i;
      if (field == 2) out.height = i;
      if (field == 3) out.width = i;
      if (field == 5) out.label = i;
      if (field == 7) out.encoded = v != 0;
    } else if (field == 4) {
      if (wire != 2) return verdict::invalid;
      out.data.assign(bytes, bytes + len);
    } else if (field == 6) {
      if (wire != 2 && wire != 5) return verdict::invalid;
      if (len % 4) return verdict::invalid;
      out.floats.insert(out.floats.end(), bytes, bytes + len);
    }
  }
  return verdict::valid;
}

// Parses and checks; returns whether gpufeed accepted the value.
bool check(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> value(reinterpret_cast<const std::byte*>(data), size);
  reference_datum ref;
  const verdict want = reference_parse(data, size, ref);
  gpufeed::datum_view d;
  try {
    d = gpufeed::parse_datum(value);
  } catch (const gpufeed::format_error&) {
    require(want != verdict::valid);
    return false;
  }
  require(want != verdict::invalid);
  require(inside(d.data, value));
  require(inside(d.float_data, value));
  require(d.float_count * 4 <= size);
  require(d.float_data_split() ? d.float_data.empty() : d.float_data.size() == d.float_count * 4);
  const std::size_t n = gpufeed::datum_payload_size(d);
  require(n <= size);
  std::vector<std::byte> out(n + 1, std::byte{0xa5});
  gpufeed::copy_datum_payload(value, d, out);  // must not throw for a value that parsed
  require(out[n] == std::byte{0xa5});
  if (want == verdict::valid) {
    require(d.channels == ref.channels && d.height == ref.height && d.width == ref.width);
    require(d.label == ref.label && d.encoded == ref.encoded);
    require(same(d.data, ref.data));
    require(d.float_count * 4 == ref.floats.size());
    if (!d.float_data_split()) require(same(d.float_data, ref.floats));
    require(same(std::span(out).first(n), ref.data.empty() ? ref.floats : ref.data));
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(data, size);
  return 0;
}

// Called by the seed driver for each seed file: the seeds are valid Datums, so each must parse
// (and agree with the reference).
extern "C" int gpufeed_fuzz_check_seed(const std::uint8_t* data, std::size_t size) {
  return check(data, size) ? 0 : 1;
}
