// gpufeed — pack(): what one pack writes (pack_job), the checks of its options, progress,
// cancellation and the metadata an HDF5 shard stores beside its records. Part of
// gpufeed/pack/pack.hpp (through run.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/pack/pack.hpp"

namespace gpufeed::detail::pack {

// The compression options ask for, its level filled in (deflate_level is compression's older
// spelling).
inline pack_compression compression_of(const pack_options& o) {
  pack_compression c = o.compression;
  if (c.codec == pack_codec::none && o.deflate_level > 0)
    c = {pack_codec::deflate, o.deflate_level};
  if (c.level == 0) c.level = default_level(c.codec);
  return c;
}

// The chunk codec options ask for.
inline chunk_codec codec_of(const pack_options& o, std::size_t element_size = 1) {
  const pack_compression c = compression_of(o);
  return chunk_codec{kind_of(c.codec), c.level, element_size};
}

// The checks pack() and repack_hdf5() share.
inline void check_common(const pack_options& o) {
  if (o.shard_bytes == 0) throw config_error("pack: shard_bytes must be > 0");
  if (o.deflate_level < 0 || o.deflate_level > 9)
    throw config_error("pack: deflate_level must be 0 (none) to 9");
  if (o.deflate_level > 0 && o.compression.codec != pack_codec::none)
    throw config_error("pack: set compression or deflate_level, not both");
  const int most = most_level(o.compression.codec);
  if (o.compression.level < 0 || o.compression.level > most)
    throw config_error("pack: compression level " + std::to_string(o.compression.level) +
                       " is out of range for " + to_string(o.compression));
  if (o.format == shard_format::lmdb && codec_of(o).kind != codec::kind::none)
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

}  // namespace gpufeed::detail::pack
