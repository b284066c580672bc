#include "checks.hpp"

#include <cstring>
#include <vector>

namespace ddp {

bool check_epoch(comm& c, std::uint64_t epoch, std::uint64_t records, std::uint64_t batches,
                 std::span<const std::uint64_t> indices, std::span<const std::uint64_t> earlier,
                 bool exact, std::string* report) {
  const auto counts = all_gather_values(c, std::span<const std::uint64_t>(&batches, 1));
  const auto all = all_gather_values(c, indices);
  bool ok = true;
  std::string r = "epoch " + std::to_string(epoch) + ": batches per rank";
  for (const auto& n : counts) {
    r += " " + std::to_string(n[0]);
    ok = ok && n[0] == counts[0][0];
  }
  r += ok ? " (equal)" : " (DIFFER)";
  std::vector<std::uint32_t> seen(records, 0);
  std::uint64_t delivered = 0, out_of_range = 0;
  auto count = [&](std::span<const std::uint64_t> v) {
    for (auto i : v) {
      ++delivered;
      if (i < records) ++seen[i]; else ++out_of_range;
    }
  };
  count(earlier);
  for (const auto& v : all) count(v);
  std::uint64_t missing = 0, repeated = 0;
  for (auto s : seen) {
    if (s == 0) ++missing;
    if (s > 1) repeated += s - 1;
  }
  r += "; " + std::to_string(delivered) + " records delivered";
  if (!earlier.empty()) r += " (" + std::to_string(earlier.size()) + " before the resume)";
  r += ", " + std::to_string(missing) + " of " + std::to_string(records) + " missing, " +
       std::to_string(repeated) + " repeated";
  if (out_of_range) r += ", " + std::to_string(out_of_range) + " out of range";
  const bool covered = missing == 0 && out_of_range == 0 && (!exact || repeated == 0);
  ok = ok && covered;
  r += exact ? (covered ? ": every record exactly once" : ": NOT every record exactly once")
             : (covered ? ": the union is the dataset" : ": the union is NOT the dataset");
  if (report) *report = r;
  return ok;
}

bool check_identical_parameters(comm& c, std::span<const float> parameters, std::string* report) {
  const auto all = c.all_gather(std::as_bytes(parameters));
  std::string differ;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r].size() != all[0].size() ||
        std::memcmp(all[r].data(), all[0].data(), all[0].size()) != 0)
      differ += " " + std::to_string(r);
  if (report)
    *report = differ.empty() ? "parameters bitwise identical on all " + std::to_string(all.size()) +
                                   " ranks (" + std::to_string(parameters.size()) + " floats)"
                             : "parameters DIFFER from rank 0's on rank(s)" + differ;
  return differ.empty();
}

}  // namespace ddp
