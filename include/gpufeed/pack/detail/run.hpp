// gpufeed — pack() and verify_pack(): the definitions declared in gpufeed/pack/pack.hpp
// (included at its end).
//
// Flow: check options and inputs (job.hpp; stat every file: a missing one fails before out_dir
// is touched), plan shards and batches (plan.hpp), prepare out_dir (output.hpp), write the shards
// (write_shards.hpp), then optional verify, then the manifest.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string_view>
#include <thread>

#include "gpufeed/pack/detail/job.hpp"
#include "gpufeed/pack/detail/write_shards.hpp"
#include "gpufeed/pack/pack.hpp"

namespace gpufeed {

namespace detail::pack {

// Plans, writes, verifies and describes (manifest) the shards of `job` in out_dir, which the
// caller has checked to hold none of the inputs. A failed or cancelled pack removes every file
// it wrote (a failed --verify keeps the shards for inspection and writes no manifest).
inline pack_result run_job(const pack_job& job, const std::filesystem::path& out_dir,
                           const pack_options& o, std::chrono::steady_clock::time_point t0) {
  const bool lmdb = o.format == shard_format::lmdb;
  const bool compressed = !lmdb && job.codec.kind != codec::kind::none;
  const pack_plan plan = make_plan(job.sizes, o.shard_bytes, std::uint64_t{4} << 20,
                                   compressed ? job.chunk_bytes : 0, job.align);
  if (o.cancelled && o.cancelled()) throw_cancelled(out_dir, 0);
  prepare_out_dir(out_dir, o.prefix, o.force);

  pack_result res;
  res.format = o.format;
  res.labels = job.has_labels;
  res.lmdb_datum = lmdb && o.lmdb_datum;
  res.records = job.sizes.size();
  res.bytes = plan.total_bytes;
  res.shuffled = o.shuffle;
  res.seed = o.seed;
  res.input_of = job.input_of;
  std::vector<std::uint32_t> crc(static_cast<std::size_t>(job.sizes.size()), 0);
  progress_meter meter(o, job.sizes.size(), plan.total_bytes, plan.shards.size(), t0);
  std::size_t threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, plan.batches.size());

  std::vector<std::filesystem::path> written;  // removed if pack fails
  written.push_back(mark_in_progress(out_dir, manifest_name));
  try {
    write_shards(job, plan, out_dir, o, threads, meter, res, crc, written);
  } catch (const pack_stop&) {
    remove_quietly(written);
    throw_cancelled(out_dir, res.shards.size());
  } catch (...) {
    remove_quietly(written);
    throw;
  }
  if (o.verify) {
    try {
      verify_written(job, plan, res, crc, o, threads, meter);
    } catch (const pack_stop&) {
      remove_quietly(written);
      throw_cancelled(out_dir, res.shards.size());
    }
  }
  write_file_atomically(out_dir, manifest_name, manifest_text(manifest_of(job, plan, res, o)));
  res.manifest = out_dir / manifest_name;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace detail::pack

inline namespace GPUFEED_PACK_FORMATS {

inline pack_result pack(const std::vector<pack_input>& given, const std::filesystem::path& out_dir,
                        const pack_options& o) {
  namespace d = detail::pack;
  const auto t0 = std::chrono::steady_clock::now();
  d::check_options(given, o);
  const std::uint64_t n = given.size();
  d::pack_job job;
  job.input_of = d::record_order(n, o.shuffle, o.seed);
  // The inputs in record order; stat every file before out_dir is touched.
  auto inputs = std::make_shared<std::vector<std::filesystem::path>>();
  inputs->reserve(given.size());
  job.has_labels = given.front().label.has_value();
  for (const std::uint64_t i : job.input_of) {
    const pack_input& in = given[i];
    job.sizes.push_back(d::input_size(in.path));
    inputs->push_back(in.path);
    job.names.push_back(in.name);
    if (job.has_labels) job.labels.push_back(*in.label);
  }
  job.codec = d::codec_of(o);
  job.chunk_bytes = o.chunk_bytes;
  // parts() reads job.sizes through the plan's copy: a reference to the files and their sizes.
  job.parts = [inputs, &job] {
    return d::read_part_fn([inputs, &job](std::uint64_t r, std::byte* dst, std::uint64_t len,
                                          std::uint64_t from) {
      const d::input_file f((*inputs)[r], job.sizes[r]);
      if (len) f.read(dst, len, from, job.sizes[r]);
    });
  };
  job.describe = [inputs](std::uint64_t r) {
    return "input file '" + (*inputs)[r].string() + "'";
  };
  d::refuse_inputs_inside_output(*inputs, out_dir);
  return d::run_job(job, out_dir, o, t0);
}

inline void verify_pack(const pack_result& result, std::size_t threads) {
  namespace d = detail::pack;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (const packed_shard& s : result.shard_info) {
    d::read_back rb;
    try {
      rb = d::read_shard(s.file, result.format == shard_format::lmdb, result.lmdb_datum,
                         result.labels, threads);
    } catch (const format_error& e) {
      // The source's identity check against the manifest pack wrote: these are pack's own
      // shards, so a different fingerprint is damage.
      if (std::string_view(e.what()).find("not the file the manifest lists") ==
          std::string_view::npos)
        throw;
      d::verify_fail("the shard's bytes differ from what pack wrote (its size or fingerprint "
                     "differs from the manifest's)",
                     s.file);
    }
    std::uint64_t bytes = 0;
    std::uint32_t crc = 0;
    for (std::size_t i = 0; i < rb.sizes.size(); ++i) {
      bytes += rb.sizes[i];
      crc = d::crc32_join(crc, rb.crcs[i], rb.sizes[i]);
    }
    if (rb.sizes.size() != s.records || bytes != s.bytes || crc != s.crc32)
      d::verify_fail("the shard's records differ from what pack wrote (" +
                         std::to_string(rb.sizes.size()) + " records, " + std::to_string(bytes) +
                         " bytes, crc32 " + d::hex32(crc) + "; expected " +
                         std::to_string(s.records) + " records, " + std::to_string(s.bytes) +
                         " bytes, crc32 " + d::hex32(s.crc32) + ")",
                     s.file);
  }
}

}  // inline namespace GPUFEED_PACK_FORMATS

}  // namespace gpufeed

#if defined(GPUFEED_PACK_HDF5)
#include "gpufeed/pack/detail/repack.hpp"
#endif
