// gpufeed — pack() and verify_pack(): the definitions declared in gpufeed/pack/pack.hpp
// (included at its end).
//
// Flow: check options and inputs (stat every file: a missing one fails before out_dir is
// touched), plan shards and batches (plan.hpp), prepare out_dir (output.hpp), then workers read
// (and compress) batches ahead of the calling thread, which writes them in order (one shard at a
// time, under a temporary name, renamed when finished), then optional verify, then the manifest.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string_view>
#include <thread>

#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/posix_file.hpp"
#include "gpufeed/pack/pack.hpp"

namespace gpufeed {

namespace detail::pack {

// The chunk codec options ask for (deflate_level is compression's older spelling).
inline chunk_codec codec_of(const pack_options& o, std::size_t element_size = 1) {
  chunk_codec c;
  c.kind = o.compression.codec;
  c.level = o.compression.level;
  if (c.kind == codec_kind::none && o.deflate_level > 0) {
    c.kind = codec_kind::deflate;
    c.level = o.deflate_level;
  }
  if (c.level == 0)
    c.level = c.kind == codec_kind::deflate ? 4 : c.kind == codec_kind::zstd ? 3 : 0;
  c.element_size = element_size;
  return c;
}

// The checks pack() and repack_hdf5() share.
inline void check_common(const pack_options& o) {
  if (o.shard_bytes == 0) throw config_error("pack: shard_bytes must be > 0");
  if (o.deflate_level < 0 || o.deflate_level > 9)
    throw config_error("pack: deflate_level must be 0 (none) to 9");
  if (o.deflate_level > 0 && o.compression.codec != codec_kind::none)
    throw config_error("pack: set compression or deflate_level, not both");
  const int most = o.compression.codec == codec_kind::deflate ? 9
                   : o.compression.codec == codec_kind::zstd  ? 22
                                                              : 0;
  if (o.compression.level < 0 || o.compression.level > most)
    throw config_error("pack: compression level " + std::to_string(o.compression.level) +
                       " is out of range for " + to_string(o.compression));
  if (o.format == shard_format::lmdb && codec_of(o).kind != codec_kind::none)
    throw config_error("pack: compression (--compress, --deflate) applies to HDF5 shards only");
  if (o.chunk_bytes == 0 || o.chunk_bytes > (std::uint64_t{1} << 30))
    throw config_error("pack: chunk_bytes must be 1 byte to 1 GiB");
  check_prefix(o.prefix);
}

inline void check_options(const std::vector<pack_input>& inputs, const pack_options& o) {
  if (o.format == shard_format::hdf5 && !has_hdf5_writer)
    throw config_error("pack: this program has no HDF5 shard writer (link gpufeed::pack_hdf5)");
  if (o.format == shard_format::lmdb && !has_lmdb_writer)
    throw config_error("pack: this program has no LMDB shard writer (link gpufeed::pack_lmdb)");
  if (inputs.empty()) throw config_error("pack: no input files");
  check_common(o);
  if (o.format == shard_format::hdf5 && o.lmdb_datum)
    throw config_error("pack: Datum values apply to LMDB shards only");
  if (o.format == shard_format::lmdb && !o.lmdb_datum && inputs.front().label)
    throw config_error(
        "pack: raw LMDB values cannot hold labels; store Caffe Datum values "
        "(lmdb_datum, gpufeed pack --datum) or use HDF5");
  const bool labels = inputs.front().label.has_value();
  for (const pack_input& in : inputs) {
    if (in.label.has_value() != labels)
      throw config_error(
          "pack: either every input has a label or none has; this one differs "
          "from the first",
          file_context(in.path));
    if (in.name.find('\0') != std::string::npos)
      throw config_error("pack: an input name contains a NUL byte", file_context(in.path));
    if (o.lmdb_datum && labels &&
        (*in.label < std::numeric_limits<std::int32_t>::min() ||
         *in.label > std::numeric_limits<std::int32_t>::max()))
      throw config_error(
          "pack: a Caffe Datum label is an int32; this one is " + std::to_string(*in.label),
          file_context(in.path));
  }
}

// Calls the progress callback at most every 100 ms, and always when `final`.
class progress_meter {
 public:
  progress_meter(const pack_options& o, std::uint64_t files, std::uint64_t bytes,
                 std::size_t shards, std::chrono::steady_clock::time_point t0)
      : fn_(o.progress), t0_(t0) {
    p_.files_total = files;
    p_.bytes_total = bytes;
    p_.shards_total = shards;
  }
  pack_progress& state() { return p_; }
  void report(bool final = false) {
    if (!fn_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!final && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    p_.seconds = std::chrono::duration<double>(now - t0_).count();
    const double s = std::chrono::duration<double>(now - phase_).count();
    p_.files_per_second = s > 0 ? static_cast<double>(p_.files_done) / s : 0;
    p_.bytes_per_second = s > 0 ? static_cast<double>(p_.bytes_done) / s : 0;
    const double left = static_cast<double>(p_.bytes_total - p_.bytes_done);
    p_.eta_seconds = p_.bytes_per_second > 0 ? left / p_.bytes_per_second : 0;
    fn_(p_);
  }
  void start_verify() {
    p_.verifying = true;
    p_.files_done = p_.bytes_done = 0;
    p_.shards_done = 0;
    phase_ = std::chrono::steady_clock::now();
  }

 private:
  std::function<void(const pack_progress&)> fn_;
  pack_progress p_;
  std::chrono::steady_clock::time_point t0_, phase_ = t0_, last_{};
};

// Removes what a failed pack wrote (best effort: the original error matters more).
inline void remove_quietly(const std::vector<std::filesystem::path>& paths) noexcept {
  for (const auto& p : paths) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
}

// Thrown inside run_job when options.cancelled says stop; turned into cancelled_error once what
// was written is removed.
struct pack_stop {};
inline void stop_if_cancelled(const pack_options& o) {
  if (o.cancelled && o.cancelled()) throw pack_stop{};
}

// The cancelled_error of a pack stopped after `shards` finished shards were written (and
// removed, with the temporaries).
[[noreturn]] inline void throw_cancelled(const std::filesystem::path& out, std::size_t shards) {
  throw cancelled_error("pack: interrupted: removed " + std::to_string(shards) +
                            " finished shard" + (shards == 1 ? "" : "s") +
                            " and the temporaries it had written; no manifest was written",
                        file_context(out.string()));
}

// What one pack writes, whatever its inputs: files (pack) or a dataset's rows (repack_hdf5).
struct pack_job {
  std::vector<std::uint64_t> sizes;     // per record
  bool has_labels = false;
  std::vector<std::int64_t> labels;     // per record when has_labels
  std::vector<std::string> names;       // per record, or empty: no names stored
  std::vector<std::uint64_t> input_of;  // per record: its input's index (pack_result::input_of)
  std::function<read_part_fn()> parts;  // a reader of record parts, made once per batch
  std::function<std::string(std::uint64_t)> describe;  // record -> "input file '...'", for verify
  chunk_codec codec;
  std::uint64_t chunk_bytes = 0;  // compressed: chunk bytes (whole rows when fixed)
#if defined(GPUFEED_PACK_HDF5)
  data_shape shape;  // blob by default
#endif
  std::uint64_t align = 1;  // row bytes of the fixed layout
  std::string source_text;  // manifest "source": JSON object text, or empty
};

#if defined(GPUFEED_PACK_HDF5)
// What an HDF5 shard stores beside its records: offsets (blob), names, labels.
inline shard_meta meta_for(const pack_plan& plan, const shard_plan& s, const pack_job& job) {
  shard_meta m;
  const bool blob = !job.shape.fixed();
  if (!job.names.empty()) m.name_offsets.push_back(0);
  for (std::uint64_t r = s.first_record; r < s.first_record + s.records; ++r) {
    if (blob) m.offsets.push_back(plan.offset[r]);
    if (!job.names.empty()) {
      m.names += job.names[r];
      m.name_offsets.push_back(m.names.size());
    }
    if (job.has_labels) m.labels.push_back(job.labels[r]);
  }
  if (blob) m.offsets.push_back(s.bytes);
  return m;
}
#endif

// Plans, writes, verifies and describes (manifest) the shards of `job` in out_dir, which the
// caller has checked to hold none of the inputs.
inline pack_result run_job(const pack_job& job, const std::filesystem::path& out_dir,
                           const pack_options& o, std::chrono::steady_clock::time_point t0) {
  namespace fs = std::filesystem;
  const bool lmdb = o.format == shard_format::lmdb;
  const bool compressed = !lmdb && job.codec.kind != codec_kind::none;
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
  const std::uint64_t n = job.sizes.size();
  std::vector<std::uint32_t> crc(static_cast<std::size_t>(n), 0);
  progress_meter meter(o, n, plan.total_bytes, plan.shards.size(), t0);
  pack_progress& prog = meter.state();
  std::size_t threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, plan.batches.size());
  [[maybe_unused]] const auto label = [&](std::uint64_t r) {
    return job.has_labels ? job.labels[r] : 0;
  };
  [[maybe_unused]] const auto input_name = [&](std::uint64_t r) {
    return job.names.empty() ? std::string_view() : std::string_view(job.names[r]);
  };

  std::vector<fs::path> written;  // removed if pack fails
  try {
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
  } catch (const pack_stop&) {
    remove_quietly(written);
    throw_cancelled(out_dir, res.shards.size());
  } catch (...) {
    remove_quietly(written);
    throw;
  }

  if (o.verify) {
    // Every record against the crc32 of its input's bytes as read at pack time. On a mismatch
    // the shards stay (for inspection) and no manifest is written.
    meter.start_verify();
    for (const packed_shard& s : res.shard_info) {
      if (o.cancelled && o.cancelled()) {
        remove_quietly(written);
        throw_cancelled(out_dir, res.shards.size());
      }
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

  manifest_data m;
  m.format = to_string(o.format);
  m.version = version_string;
  m.prefix = o.prefix;
  m.records = res.records;
  m.bytes = res.bytes;
  m.shard_bytes = o.shard_bytes;
  m.chunk_bytes = compressed ? job.chunk_bytes : 0;
  m.deflate_level = compressed && job.codec.kind == codec_kind::deflate ? job.codec.level : 0;
  m.compression = compressed ? to_string(pack_compression{job.codec.kind, job.codec.level})
                             : "none";
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
      const posix_file f(lmdb ? s.file / "data.mdb" : s.file);
      ms.file_bytes = f.size();
      ms.fingerprint = shard_fingerprint(f.fd(), f.size(), f.path());
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
  write_file_atomically(out_dir, manifest_name, manifest_text(m));
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
