// gpufeed::detail — the per-record transform stage in the loader's workers (the public side is
// gpufeed/record_transform.hpp): each worker's scratch buffer and loop over a task's records,
// the errors the transform's failures become, and the packing of bounded outputs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/error_policy.hpp"
#include "gpufeed/detail/loader/read_confirm.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/telemetry.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/detail/error_class.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/record_transform.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

// Sources that list their shards without opening them (a test's in-memory shards): path,
// first_record, records each. hdf5_source and lmdb_source, whose shards() opens every shard,
// name files through file_of() instead.
template <class S>
concept sharded_source = requires(const S& s) {
  s.shards().begin()->path;
  { s.shards().begin()->first_record } -> std::convertible_to<std::uint64_t>;
  { s.shards().begin()->records } -> std::convertible_to<std::uint64_t>;
};

// The file that holds record i, or "" when the source does not say. Never opens a file
// (file_naming_source) and never throws: it names the file in an error being reported, and a
// failure to name it must not replace that error (or escape a worker's catch handler).
template <source S>
std::string shard_file_of(const S& s, std::uint64_t i) noexcept {
  try {
    if constexpr (file_naming_source<S>) {
      return std::filesystem::path(s.file_of(i)).string();
    } else if constexpr (sharded_source<S>) {
      const auto& v = s.shards();
      auto it = std::upper_bound(v.begin(), v.end(), i, [](std::uint64_t x, const auto& shard) {
        return x < static_cast<std::uint64_t>(shard.first_record);
      });
      if (it != v.begin()) {
        --it;
        if (i - it->first_record < it->records) return std::filesystem::path(it->path).string();
      }
    }
  } catch (...) {
  }
  (void)s;
  (void)i;
  return {};
}

// Record i's input name (record_naming_source), or "" when the source does not say. Asked only
// on the error path — it may open a file (hdf5_source reads the shard's names table) — and never
// throws, for the same reason as shard_file_of: a failure to name the input must not replace the
// error being reported.
template <source S>
std::string input_name_of(const S& s, std::uint64_t i) noexcept {
  try {
    if constexpr (record_naming_source<S>) {
      std::optional<std::string> name = s.name_of(i);
      if (name) return std::move(*name);
    }
  } catch (...) {
  }
  (void)s;
  (void)i;
  return {};
}

// An E saying the record transform failed with `x` (the exception being handled, nested in it).
template <class E>
std::exception_ptr nested_transform_error(const error& x, error_context c) {
  try {
    std::throw_with_nested(E("record transform failed: " + x.message(), std::move(c)));
  } catch (...) {
    return std::current_exception();
  }
}

// What the record transform's exception `thrown` is delivered as: a gpufeed::error of the same
// class (gpufeed::error itself for other exceptions) that names `file`, `record` and `input`
// (the record's input name, "" when unknown) where it named none, with the original nested.
inline std::exception_ptr transform_failure(std::exception_ptr thrown, const std::string& file,
                                            std::uint64_t record, const std::string& input = {}) {
  error_context here;
  here.file = file;
  here.record = record;
  here.input = input;
  try {
    try {
      std::rethrow_exception(std::move(thrown));
    } catch (const error& x) {
      error_context c = x.context();
      if (c.file.empty()) c.file = file;
      if (!c.record) c.record = record;
      if (c.input.empty()) c.input = input;
      return with_error_class(
          x, [&]<class E>(std::type_identity<E>) { return nested_transform_error<E>(x, c); });
    } catch (const std::exception& x) {
      std::throw_with_nested(error(std::string("record transform failed: ") + x.what(), here));
    } catch (...) {
      std::throw_with_nested(error("record transform failed: an exception of unknown type", here));
    }
  } catch (...) {
    return std::current_exception();
  }
}

// One worker's side of the stage: its scratch buffer for records whose reader hands out no view.
template <source Source>
class record_stage {
 public:
  record_stage(const Source& src, const pipeline_setup& p) : source_(src), setup_(p) {}

  // Runs the transform on records [begin, end) of `slot` (laid out as `l`), each writing into its
  // place. Failures go to slot.failures; `transform_ns` grows by the time inside the callable (two
  // clock reads per record, ~40 ns, beside a decode); returns the output bytes written.
  template <class Reader>
  std::uint64_t run(Reader& reader, staging_slot& slot, const slot_layout& l, std::size_t begin,
                    std::size_t end, std::uint64_t& failures, std::uint64_t& transform_ns) {
    std::byte* base = slot.buffer.data();
    const std::uint64_t* idx = slot_layout::indices(base, l);
    const std::int64_t* lab = slot_layout::labels(base, l);
    const std::uint64_t* off = slot_layout::offsets(base, l);
    std::byte* data = slot_layout::data(base, l);
    const record_transform& f = setup_.config.per_record;
    std::uint64_t bytes = 0;
    confirm_per_task(reader);
    for (std::size_t k = begin; k < end; ++k) {
      const std::uint64_t i = idx[k];
      record_input in;
      try {
        in.bytes = input(reader, i);
      } catch (...) {
        fail(slot, k, std::current_exception(), false, failures);  // the source's own error
        continue;
      }
      in.index = i;
      in.label = lab[k];
      in.epoch = slot.meta.epoch;
      record_rng rng(setup_.start.seed, slot.meta.epoch, i);
      const std::span<std::byte> out(data + off[k], off[k + 1] - off[k]);
      std::size_t n = 0;
      const auto t0 = steady::now();
      try {
        n = f(in, out, rng);
        transform_ns += since_ns(t0);
      } catch (...) {
        transform_ns += since_ns(t0);
        fail(slot, k,
             transform_failure(std::current_exception(), shard_file_of(source_, i), i,
                               input_name_of(source_, i)),
             false, failures);
        continue;
      }
      if (f.is_fixed() ? n != out.size() : n > out.size()) {
        fail(slot, k, size_error(n, out.size(), f.is_fixed(), i), true, failures);
        continue;
      }
      if (!f.is_fixed()) slot.output_sizes[k] = n;
      bytes += n;
    }
    // An output made from a read that does not stand (read_confirm.hpp) fails with the read.
    bytes -= confirm_task_reads(
        reader, slot, end - begin, [&](std::size_t j) { return begin + j; }, idx,
        [&](std::size_t k) -> std::uint64_t {
          return f.is_fixed() ? off[k + 1] - off[k] : slot.output_sizes[k];
        },
        failures);
    return bytes;
  }

 private:
  // Record i's bytes: the reader's view when it hands one out, else read into scratch.
  template <class Reader>
  std::span<const std::byte> input(Reader& reader, std::uint64_t i) {
    if constexpr (view_reader<Reader>) {
      return reader.view(i);
    } else {
      const std::size_t n = source_.record_size(i);
      if (scratch_.size() < n) scratch_.resize(n);
      reader.read(i, std::span(scratch_.data(), n));
      return {scratch_.data(), n};
    }
  }

  std::exception_ptr size_error(std::size_t n, std::size_t room, bool fixed, std::uint64_t i) {
    error_context c;
    c.file = shard_file_of(source_, i);
    c.record = i;
    c.input = input_name_of(source_, i);
    const std::string what =
        fixed ? "record transform returned " + std::to_string(n) +
                    " bytes for a fixed output of " + std::to_string(room) + " bytes"
              : "record transform returned " + std::to_string(n) +
                    " bytes, more than its bound of " + std::to_string(room) +
                    " (record_transform::bounded: return the bytes written, at most out.size())";
    return std::make_exception_ptr(config_error(what, std::move(c)));
  }

  static void fail(staging_slot& slot, std::size_t k, std::exception_ptr e, bool fatal,
                   std::uint64_t& failures) {
    ++failures;
    std::lock_guard lock(slot.failure_mutex);
    slot.failures.push_back(record_failure{k, std::move(e), fatal});
  }

  const Source& source_;
  const pipeline_setup& setup_;
  std::vector<std::byte> scratch_;  // grows to the largest input seen, never shrinks
};

// A bounded record transform's batch, written at k x stride: applies the error policy (as
// apply_error_policy does) and packs the records back to back, so the slot is laid out like any
// variable-size batch. Substitute takes the nearest good record (earlier first) whatever its
// size: every record is at most `stride`, so writing output record k never reaches past
// (k + 1) x stride, where later records still lie untouched, and an earlier donor already lies
// packed below the write position.
inline std::vector<skipped_record> pack_bounded(staging_slot& slot, const slot_layout& layout,
                                                std::size_t stride, error_policy policy) {
  std::vector<skipped_record> out;
  if (batch_failed(slot, policy)) return out;
  slot_records records(slot, layout);
  auto& [idx, lab, off, data, n, failed] = records;
  std::vector<std::optional<std::size_t>> donor(n);
  for (const auto& f : slot.failures) {
    const std::size_t p = f.position;
    skipped_record r = records.skipped(slot, f);
    if (policy == error_policy::substitute) {
      for (std::size_t d = 1; d < n && !donor[p]; ++d) {
        if (p >= d && !failed[p - d]) donor[p] = p - d;
        else if (p + d < n && !failed[p + d]) donor[p] = p + d;
      }
    }
    if (donor[p]) {
      r.substituted = true;
      r.substitute_index = idx[*donor[p]];
    }
    out.push_back(std::move(r));
  }
  const std::vector<std::uint64_t> index(idx, idx + n);
  const std::vector<std::int64_t> label(lab, lab + n);
  std::vector<std::uint64_t> packed_at(n, 0);  // where record k's own bytes lie once packed
  std::size_t w = 0;
  std::uint64_t cursor = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (failed[k] && !donor[k]) continue;
    const std::size_t from = failed[k] ? *donor[k] : k;
    const std::uint64_t size = slot.output_sizes[from];
    const std::uint64_t at = from < k ? packed_at[from] : from * stride;
    if (cursor != at && size) std::memmove(data + cursor, data + at, size);
    if (!failed[k]) packed_at[k] = cursor;
    idx[w] = index[from];
    lab[w] = label[from];
    off[w] = cursor;
    cursor += size;
    ++w;
  }
  records.packed(slot, w, cursor);
  return out;
}

}  // namespace gpufeed::detail::loading
