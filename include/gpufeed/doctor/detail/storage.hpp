// The doctor's storage check: how fast can PATH's files be read from storage (cold) and from the
// page cache (warm), and will the data sit in the page cache between epochs? Throws nothing but
// std::bad_alloc: every other failure becomes a failed check that says what and where.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

#include "gpufeed/doctor/detail/format.hpp"
#include "gpufeed/doctor/detail/storage_io.hpp"
#include "gpufeed/doctor/options.hpp"
#include "gpufeed/doctor/report.hpp"

namespace gpufeed::detail::doctor {

// Wording for where the loader's bytes will come from, and whether that deserves a warning.
inline void judge_page_cache(doctor_check& c, std::uint64_t total, std::uint64_t resident,
                             std::uint64_t scanned, const meminfo& mem, double cold_gbps) {
  const double cached_fraction = scanned ? static_cast<double>(resident) / static_cast<double>(scanned) : 0.0;
  c.fact("already in the page cache", bytes(resident) + " of the " + bytes(scanned) + " examined (" +
                                          fixed(cached_fraction * 100.0, 0) + "%)");
  c.number("cached_fraction", cached_fraction);
  if (mem.total) {
    c.fact("memory", bytes(mem.total) + " total, " + bytes(mem.available) + " available");
    c.number("mem_total_bytes", static_cast<double>(mem.total));
    c.number("mem_available_bytes", static_cast<double>(mem.available));
  }
  if (scanned == total && cached_fraction >= 0.95) {
    c.summary += "; all of it is already in the page cache, so the loader reads it at memory speed";
  } else if (!mem.total) {
    c.summary += "; memory size unknown (no /proc/meminfo), so whether it fits in the page cache is unknown";
  } else if (total <= mem.available + resident) {
    c.summary += "; it fits in the page cache (" + bytes(mem.available) +
                 " available): the first epoch reads from storage, later epochs from memory";
  } else {
    c.at_least(check_status::warn);
    c.summary += "; it is larger than the memory the page cache can use (" + bytes(mem.available) +
                 " available), so every epoch reads mostly from storage, at about " + gbps(cold_gbps);
    c.hint = "faster storage, more memory, or a smaller (compressed) dataset raise the ceiling; "
             "gpufeed's readers cannot go faster than the storage read rate";
  }
}

inline doctor_check storage_check(const std::filesystem::path& data,
                                  const storage_check_options& p) {
  doctor_check c("storage", "Storage read rate");
  try {
    namespace fs = std::filesystem;
    if (data.empty()) {
      c.summary = "no data path given: storage read rate not measured";
      c.hint = "pass the directory or file holding your shards (gpufeed doctor --data PATH)";
      return c;
    }
    c.fact("path", data.string());
    if (p.max_bytes == 0) {
      c.status = check_status::fail;
      c.summary = "asked to read at most 0 bytes: nothing to measure";
      c.hint = "give the storage check a byte cap above 0 (gpufeed doctor --max-gib)";
      return c;
    }
    std::error_code ec;
    const auto st = fs::status(data, ec);
    if (!fs::exists(st)) {
      c.status = check_status::fail;
      c.summary = "'" + data.string() + "' does not exist" + (ec && ec != std::errc::no_such_file_or_directory ? " or cannot be examined (" + ec.message() + ")" : "");
      c.hint = "check the path given to --data";
      return c;
    }
    if (!fs::is_directory(st) && !fs::is_regular_file(st)) {
      c.status = check_status::fail;
      c.summary = "'" + data.string() + "' is neither a directory nor a regular file";
      return c;
    }
    c.fact("file system", filesystem_name(data));
    const file_listing list = list_data_files(data, p.max_files);
    c.fact("files", std::to_string(list.files.size()) + (list.truncated ? " (stopped counting there)" : ""));
    c.fact("size", bytes(list.total_bytes));
    c.number("files", static_cast<double>(list.files.size()));
    c.number("total_bytes", static_cast<double>(list.total_bytes));
    if (list.files.empty()) {
      c.status = check_status::fail;
      c.summary = "'" + data.string() + "' holds no data (no non-empty regular file this user can see)";
      return c;
    }

    // Residency first: the reads below change it.
    std::uint64_t scanned = 0;
    const std::uint64_t resident = resident_bytes(list.files, p.residency_max_bytes, scanned);
    const meminfo mem = read_meminfo(p.meminfo);

    const read_pass cold = read_sequential(list.files, p.max_bytes, p.block_bytes, p.direct_io);
    // Warm: make sure the bytes are cached (O_DIRECT did not cache them), then time a re-read. Kept
    // to half the available memory so the re-read is not itself evicting what it reads.
    std::uint64_t warm_cap = cold.bytes;
    if (mem.available) warm_cap = std::min<std::uint64_t>(warm_cap, mem.available / 2);
    if (cold.direct) (void)read_sequential(list.files, warm_cap, p.block_bytes, false);
    const read_pass warm = read_sequential(list.files, warm_cap, p.block_bytes, false);

    c.status = check_status::pass;
    c.number("bytes_read", static_cast<double>(cold.bytes));
    c.number("cold_gbps", cold.gbps());
    c.number("warm_gbps", warm.gbps());
    c.fact("read", bytes(cold.bytes) + " sequentially, " + bytes(std::max<std::size_t>(p.block_bytes, 4096)) +
                       " per read, one thread" + (cold.bytes < list.total_bytes ? " (capped)" : ""));
    std::string cold_words;
    if (cold.direct) {
      c.fact("from storage (O_DIRECT, cold)",
             gbps(cold.gbps()) + ": uncached reads, one in flight, no kernel read-ahead (gpufeed "
                                 "bench's cold rate is buffered, with read-ahead, so often higher)");
      cold_words = "from storage " + gbps(cold.gbps()) + " (O_DIRECT, no read-ahead)";
    } else {
      const std::string why = p.direct_io ? "this file system does not support O_DIRECT (" + cold.direct_refusal + ")"
                                          : "O_DIRECT was not asked for";
      c.fact("first read (buffered)", gbps(cold.gbps()) + ": " + why +
                                          ", so this is a cold rate only for bytes not already cached");
      cold_words = "first read " + gbps(cold.gbps()) + " (buffered: no O_DIRECT here)";
    }
    c.fact("from the page cache (warm)", gbps(warm.gbps()) + " over " + bytes(warm.bytes));
    c.summary = "read " + bytes(cold.bytes) + " of " + bytes(list.total_bytes) + " in " +
                std::to_string(list.files.size()) + (list.files.size() == 1 ? " file: " : " files: ") +
                cold_words + ", from the page cache " + gbps(warm.gbps()) + ", one thread each";
    judge_page_cache(c, list.total_bytes, resident, scanned, mem, cold.gbps());
  } catch (const std::exception& e) {
    c.status = check_status::fail;
    c.summary = std::string("the storage check could not finish: ") + e.what();
  } catch (...) {
    c.status = check_status::fail;
    c.summary = "the storage check could not finish (unknown error)";
  }
  return c;
}

}  // namespace gpufeed::detail::doctor
