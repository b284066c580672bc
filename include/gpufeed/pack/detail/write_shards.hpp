// gpufeed — pack(): writing a job's shards, checking them against their inputs (--verify) and
// the manifest that describes them. Part of gpufeed/pack/pack.hpp (through run.hpp).
//
// Workers read (and compress) batches ahead of the calling thread, which writes them in order:
// one shard at a time, under a temporary name, renamed when finished.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/pack/detail/job.hpp"

namespace gpufeed::detail::pack {

// Writes the shards of `plan` into out_dir with `threads` reading workers: each record's crc32
// into crc, each finished shard into res.shards / res.shard_info. Every file it creates (the
// temporary, then the finished shard) is in `written` first, for the caller to remove if the
// pack fails or is cancelled (pack_stop).
inline void write_shards(const pack_job& job, const pack_plan& plan,
                         const std::filesystem::path& out_dir, const pack_options& o,
                         std::size_t threads, progress_meter& meter, pack_result& res,
                         std::vector<std::uint32_t>& crc,
                         std::vector<std::filesystem::path>& written) {
  namespace fs = std::filesystem;
  const bool lmdb = o.format == shard_format::lmdb;
  const bool compressed = !lmdb && job.codec.kind != codec::kind::none;
  pack_progress& prog = meter.state();
  [[maybe_unused]] const auto label = [&](std::uint64_t r) {
    return job.has_labels ? job.labels[r] : 0;
  };
  [[maybe_unused]] const auto input_name = [&](std::uint64_t r) {
    return job.names.empty() ? std::string_view() : std::string_view(job.names[r]);
  };
  batch_pipeline pipe(plan.batches.size(), threads, 2 * threads + 2,
                      [&](std::size_t k, batch_data& b) {
                        fill_batch(plan, job.parts(), k, compressed ? job.codec : chunk_codec{},
                                   b);
                      });
  for (std::size_t si = 0; si < plan.shards.size(); ++si) {
    const shard_plan& s = plan.shards[si];
    const std::string name = shard_name(o.prefix, si, lmdb);
    const fs::path tmp = out_dir / temp_name(name), final_path = out_dir / name;
    written.push_back(tmp);
#if defined(GPUFEED_PACK_HDF5)
    std::optional<hdf5_shard_writer> h5;
    if (!lmdb) h5.emplace(tmp, s.bytes, s.chunk, job.codec, meta_for(plan, s, job), job.shape);
#endif
#if defined(GPUFEED_PACK_LMDB)
    std::optional<lmdb_shard_writer> mdb;
    if (lmdb) {
      std::vector<std::uint64_t> values;
      for (std::uint64_t r = s.first_record; r < s.first_record + s.records; ++r)
        values.push_back(lmdb_value_size(plan.sizes[r], res.lmdb_datum, label(r)));
      mdb.emplace(tmp, lmdb_map_bound(values), res.lmdb_datum);
    }
#endif
    for (std::size_t k = s.first_batch; k < s.first_batch + s.batches; ++k) {
      stop_if_cancelled(o);
      batch_data b = pipe.take(k);
      const batch_plan& bp = plan.batches[k];
      for (std::uint64_t r = bp.first_record; r < bp.end_record; ++r) {
        const std::uint64_t lo = std::max(plan.offset[r], bp.begin);
        const std::uint64_t hi = std::min(plan.end_of(r), bp.end);
        const std::uint32_t piece = b.crc[r - bp.first_record];
        crc[r] = lo == plan.offset[r] ? piece : crc32_join(crc[r], piece, hi - lo);
#if defined(GPUFEED_PACK_LMDB)
        if (mdb) {
          if (lo == plan.offset[r])
            mdb->begin_record(r, input_name(r), plan.sizes[r], label(r));
          mdb->append(b.bytes.data() + (lo - bp.begin), hi - lo);
          if (hi == plan.end_of(r)) mdb->end_record();
        }
#endif
        if (hi == plan.end_of(r)) ++prog.files_done;
      }
#if defined(GPUFEED_PACK_HDF5)
      if (h5) h5->write(bp.begin, b);
#endif
      prog.bytes_done += bp.end - bp.begin;
      pipe.recycle(std::move(b));
      meter.report();
    }
#if defined(GPUFEED_PACK_HDF5)
    if (h5) h5->finish();
    h5.reset();
#endif
#if defined(GPUFEED_PACK_LMDB)
    if (mdb) mdb->finish();
    mdb.reset();
#endif
    std::error_code ec;
    fs::rename(tmp, final_path, ec);
    if (ec) throw_fs("cannot rename a finished shard to its final name", tmp, "rename", ec);
    written.back() = final_path;
    packed_shard info;
    info.file = final_path;
    info.first_record = s.first_record;
    info.records = s.records;
    info.bytes = s.bytes;
    for (std::uint64_t r = s.first_record; r < s.first_record + s.records; ++r)
      info.crc32 = crc32_join(info.crc32, crc[r], plan.sizes[r]);
    res.shards.push_back(final_path);
    res.shard_info.push_back(info);
    ++prog.shards_done;
  }
  meter.report(true);
}

// Reads every written shard back and checks each record's size, crc32 (and label) against what
// was read from its input at pack time: corrupt_error naming shard, record and input otherwise.
// The shards stay for inspection; the caller writes no manifest. Cancellation: pack_stop.
inline void verify_written(const pack_job& job, const pack_plan& plan, const pack_result& res,
                           const std::vector<std::uint32_t>& crc, const pack_options& o,
                           std::size_t threads, progress_meter& meter) {
  const bool lmdb = o.format == shard_format::lmdb;
  pack_progress& prog = meter.state();
  // Every record against the crc32 of its input's bytes as read at pack time. On a mismatch
  // the shards stay (for inspection) and no manifest is written.
  meter.start_verify();
  for (const packed_shard& s : res.shard_info) {
    stop_if_cancelled(o);
    const read_back rb = read_shard(s.file, lmdb, res.lmdb_datum, res.labels, threads);
    if (rb.sizes.size() != s.records)
      verify_fail("the shard holds " + std::to_string(rb.sizes.size()) + " records, " +
                      std::to_string(s.records) + " were written",
                  s.file);
    for (std::uint64_t i = 0; i < s.records; ++i) {
      const std::uint64_t r = s.first_record + i;
      const auto at = static_cast<std::size_t>(i);
      if (rb.sizes[at] != plan.sizes[r] || rb.crcs[at] != crc[r])
        verify_fail("record differs from its " + job.describe(r) + " (" +
                        std::to_string(rb.sizes[at]) + " bytes, crc32 " + hex32(rb.crcs[at]) +
                        "; expected " + std::to_string(plan.sizes[r]) + " bytes, crc32 " +
                        hex32(crc[r]) + ")",
                    s.file, r);
      if (res.labels && (rb.labels.size() <= at || rb.labels[at] != job.labels[r]))
        verify_fail("record's label differs from its input's", s.file, r);
    }
    prog.files_done += s.records;
    prog.bytes_done += s.bytes;
    ++prog.shards_done;
    meter.report();
  }
  meter.report(true);
}

// The manifest of a finished pack: its settings, and per shard its records, bytes, crc32,
// record sizes and identity (size and fingerprint, checked by a source when it opens the shard).
inline manifest_data manifest_of(const pack_job& job, const pack_plan& plan,
                                 const pack_result& res, const pack_options& o) {
  const bool lmdb = o.format == shard_format::lmdb;
  const bool compressed = !lmdb && job.codec.kind != codec::kind::none;
  manifest_data m;
  m.format = to_string(o.format);
  m.version = version_string;
  m.prefix = o.prefix;
  m.records = res.records;
  m.bytes = res.bytes;
  m.shard_bytes = o.shard_bytes;
  m.chunk_bytes = compressed ? job.chunk_bytes : 0;
  m.deflate_level = compressed && job.codec.kind == codec::kind::deflate ? job.codec.level : 0;
  m.compression = compressed ? to_string(compression_of(o)) : "none";
  m.labels = res.labels;
  m.datum = res.lmdb_datum;
  m.label_names = o.label_names;
  m.shuffled = o.shuffle;
  m.seed = o.seed;
  m.names = &job.names;
  m.source = job.source_text;
  for (std::size_t si = 0; si < res.shard_info.size(); ++si) {
    const packed_shard& s = res.shard_info[si];
    // The largest and smallest records: what a reader of the manifest sizes its slots by, and
    // learns whether every record has one size, without opening the shard (lazy open).
    std::uint64_t max_record = 0, min_record = ~std::uint64_t{0};
    for (std::uint64_t r = s.first_record; r < s.first_record + s.records; ++r) {
      max_record = std::max(max_record, plan.sizes[static_cast<std::size_t>(r)]);
      min_record = std::min(min_record, plan.sizes[static_cast<std::size_t>(r)]);
    }
    manifest_shard ms{s.file.filename().string(), s.records, s.bytes, s.first_record, s.crc32,
                      max_record};
    ms.min_record = s.records ? min_record : 0;
    {  // the shard's identity, checked by a source when it first opens the shard
      const io::posix_file f(lmdb ? s.file / "data.mdb" : s.file);
      ms.file_bytes = f.size();
      ms.fingerprint = shard_fingerprint(f);
    }
    // HDF5: rows per band of chunks (what hdf5_source::decode_unit answers for an unopened
    // shard): 0 uncompressed, chunk rows for the fixed layout; compressed blob shards: unstated.
#if defined(GPUFEED_PACK_HDF5)
    if (!lmdb) {
      const std::uint64_t chunk = plan.shards[si].chunk;
      if (!compressed || chunk == 0)
        ms.band_rows = 0;
      else if (job.shape.fixed())
        ms.band_rows = chunk / job.shape.row_bytes;
    }
#endif
    m.shards.push_back(std::move(ms));
  }
  return m;
}

}  // namespace gpufeed::detail::pack
