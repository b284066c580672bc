// libFuzzer target for gpufeed::parse_datum / copy_datum_payload.
//
// Property: any byte string either parses, giving views that lie inside the input and a payload
// that copies without error, or is rejected with gpufeed::format_error. Any other exception, an
// out-of-bounds access (ASan) or undefined behaviour (UBSan) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> value(reinterpret_cast<const std::byte*>(data), size);
  gpufeed::datum_view d;
  try {
    d = gpufeed::parse_datum(value);
  } catch (const gpufeed::format_error&) {
    return 0;
  }
  require(inside(d.data, value));
  require(inside(d.float_data, value));
  require(d.float_count * 4 <= size);
  require(d.float_data_split() ? d.float_data.empty() : d.float_data.size() == d.float_count * 4);
  const std::size_t n = gpufeed::datum_payload_size(d);
  require(n <= size);
  std::vector<std::byte> out(n + 1, std::byte{0xa5});
  gpufeed::copy_datum_payload(value, d, out);  // must not throw for a value that parsed
  require(out[n] == std::byte{0xa5});
  return 0;
}
