// gpufeed::detail — the loader's device decode stage (docs/design.md, "GPU decode in the
// loader"): instead of decoding a batch's compressed records, its workers stage them for the
// device (their units' compressed bytes, the units, the runs that gather each record), the
// batch is submitted in sequence order (the device decodes each unit once, for every batch
// after it that reads it), and delivery checks the units decoded before the batch is handed
// out, reading it again on the host when one did not.
//
// What it keeps: the directory of the device cache, a pinned work area per staging slot, the
// gate that submits batches in sequence order, and per target slot what its batch gathered
// from (for the check at delivery).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/device_decode/batch_work.hpp"
#include "gpufeed/detail/device_decode/unit_directory.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/source.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::detail::loading {

namespace dd = gpufeed::detail::device_decode;

// How a loader decodes on its device: the source's units, the cache's places and each batch's
// work area.
struct device_decode_plan {
  dd::device_units units;
  std::size_t places = 0;
  dd::work_capacity work;
  // block_shuffled: each window's batches stage the next window's units (read_ahead.hpp). Only
  // when the cache holds three windows and a batch's units: the window being gathered, the next
  // one staged, and the one after that the batches in flight begin to stage; in a smaller cache
  // the units staged ahead were evicted before their window came and staged again.
  bool window_ahead = false;

  [[nodiscard]] std::uint64_t cache_bytes() const noexcept { return places * units.place_bytes; }
};

inline constexpr std::uint64_t device_cache_auto_limit = std::uint64_t{4} << 30;
inline constexpr std::size_t device_work_bytes_limit = std::size_t{256} << 20;
// Decoded bytes a sequential batch stages past a band it must stage (work_capacity::ahead): a
// decode kernel gives each unit (an LZ4 block, a zlib stream) one warp, whose decode is serial,
// so a launch runs at the device's rate only with thousands of units in it; a batch's own band
// or two hold about a hundred.
inline constexpr std::uint64_t device_stage_ahead_bytes = std::uint64_t{256} << 20;

// The prefetch depth an automatic prefetch deepens to when decoding on the device: staged
// batches wait for the in-order decode there, and 8 in flight left the workers idle most of the
// time (docs/measurements.md, "GPU decode: prefetch").
inline constexpr std::size_t device_decode_prefetch = 16;

// The plan, or nullopt when the loader decodes on the host (config_error, saying why, when
// loader_config::decode asked for the device and it cannot be).
template <source Source>
std::optional<device_decode_plan> plan_device_decode(const Source& src, const pipeline_setup& p,
                                                     transfer_engine& engine) {
  const loader_config& c = p.config;
  if (c.decode == decode_site::host) return std::nullopt;
  auto refuse = [&](const std::string& why) -> std::optional<device_decode_plan> {
    if (c.decode == decode_site::device) throw config_error("decode = device: " + why);
    return std::nullopt;
  };
  if (c.target.is_host())
    return refuse("the target is the host (a GPU target decodes on its device)");
  if (engine.decoder() == nullptr)
    return refuse("the target's engine has no decode kernels: include "
                  "gpufeed/cuda/device_decode.cuh in a CUDA source file of the program");
  if (c.per_record)
    return refuse("a per_record transform runs in the workers on decoded records");
  if constexpr (!device_decoding_source<Source>) {
    return refuse("this source has no device decoder (hdf5_source has)");
  } else {
    device_decode_plan plan;
    plan.units = src.device_units();
    const dd::device_units& u = plan.units;
    if (u.place_bytes == 0 || u.unit_records == 0)
      return refuse("the source's records are not in compressed chunks the device decodes "
                    "(LZ4, Bitshuffle, Deflate with shuffle and fletcher32)");
    // The units one batch touches, and those a block_shuffled window holds.
    const std::uint64_t b = c.batch_size, per = u.unit_records;
    std::uint64_t batch_units = std::min<std::uint64_t>(b, u.units);
    std::uint64_t window_units = 0;
    if (c.order == sample_order::sequential) batch_units = std::min(batch_units, b / per + 2);
    if (c.order == sample_order::block_shuffled) {
      window_units = std::min<std::uint64_t>(
          u.units, p.order.window() * p.order.units().max_records() / per + 1);
      batch_units = std::min(batch_units, window_units);
    }
    // Sequential order stages bands ahead (device_stage_ahead_bytes); the cache holds the
    // bands staged ahead twice over, so a burst never evicts the one before it.
    std::uint64_t ahead = 0;
    if (c.order == sample_order::sequential)
      ahead = std::min<std::uint64_t>(u.units,
                                      device_stage_ahead_bytes / std::max<std::uint64_t>(
                                                                     1, u.place_bytes / 2));
    std::uint64_t places =
        batch_units * (c.prefetch + 1) + 2 * window_units + 2 * ahead + c.workers;
    places = std::min<std::uint64_t>(places, u.units + batch_units);
    const std::uint64_t limit =
        c.device_cache_bytes ? c.device_cache_bytes : device_cache_auto_limit;
    places = std::min<std::uint64_t>(places, limit / u.place_bytes);
    ahead = std::min<std::uint64_t>(ahead, places / 4);
    plan.window_ahead = c.order == sample_order::block_shuffled && c.decode_ahead &&
                        places >= std::min(3 * window_units + batch_units, u.units);
    if (places < batch_units + 1 && c.device_cache_bytes)
      throw config_error("device_cache_bytes " + std::to_string(c.device_cache_bytes) +
                         " holds " + std::to_string(places) + " decoded units of " +
                         std::to_string(u.place_bytes) + " bytes; one batch touches up to " +
                         std::to_string(batch_units) + ": raise it to " +
                         std::to_string((batch_units + 1) * u.place_bytes) + " at least");
    if (places == 0) return refuse("a decoded unit is larger than the device cache limit");
    plan.places = static_cast<std::size_t>(places);
    // Compressed bytes a batch may stage: every unit it touches (a window's at its start).
    const std::uint64_t stage_units = std::max(batch_units + ahead, window_units);
    const std::uint64_t want = std::max<std::uint64_t>(stage_units * u.stored_bytes, 1);
    plan.work.bytes = static_cast<std::size_t>(std::clamp<std::uint64_t>(
        want, 2 * u.stored_bytes, std::max<std::uint64_t>(device_work_bytes_limit,
                                                           2 * u.stored_bytes)));
    plan.work.units = plan.work.bytes / 128 + 4096;
    plan.work.runs = static_cast<std::size_t>(b * std::max<std::uint64_t>(1, u.record_runs) + 64);
    plan.work.ahead = static_cast<std::size_t>(ahead);
    return plan;
  }
}

// A finished batch waiting for its turn to be submitted (device_stage::in_order).
struct parked_batch {
  std::size_t staging = 0;
  ready_entry entry;
};

class device_stage {
 public:
  // What a target slot's batch asked of the device, copied from its work before submission
  // (the staging slot may be planned again as soon as its copies are done).
  struct delivered {
    bool device_work = false;          // it was assembled: its units' statuses come back
    bool gathered = false;             // some of its records were gathered on the device
    std::vector<dd::unit_ref> pins;    // units it pinned (gathered from, or decoded)
    std::vector<dd::staged_unit> staged;  // units it decoded, and their unit ranges
  };

  device_stage(const device_decode_plan& plan, std::pmr::memory_resource* mr,
               std::size_t staging_slots, std::size_t target_slots)
      : plan_(plan), directory_(plan.places, plan.units.place_bytes), delivered_(target_slots) {
    for (std::size_t s = 0; s < staging_slots; ++s)
      work_.push_back(std::make_unique<dd::batch_work>(mr, plan.work));
  }

  [[nodiscard]] const device_decode_plan& plan() const noexcept { return plan_; }
  [[nodiscard]] dd::unit_directory& directory() noexcept { return directory_; }
  [[nodiscard]] dd::batch_work& work(std::size_t s) noexcept { return *work_[s]; }
  [[nodiscard]] delivered& slot(std::size_t d) noexcept { return delivered_[d]; }
  [[nodiscard]] std::size_t pinned_bytes() const noexcept {
    return work_.size() * plan_.work.area_bytes();
  }

  // Calls submit(b) for batch `sequence` and every parked one after it, in sequence order,
  // once every batch before it has been submitted; parks it otherwise. submit must not throw.
  // Every planned batch passes here exactly once (failed ones too), or the gate stalls.
  template <class Submit>
  void in_order(std::uint64_t sequence, parked_batch b, Submit&& submit) {
    std::lock_guard lock(gate_);
    parked_.emplace(sequence, std::move(b));
    while (!parked_.empty() && parked_.begin()->first == next_) {
      auto node = parked_.extract(parked_.begin());
      submit(node.mapped());
      ++next_;
    }
  }

  // Copies what target slot d's batch asks of the device from its work `w` (before assemble).
  delivered& record(std::size_t d, dd::batch_work& w, bool assembled, bool gathered) {
    delivered& b = delivered_[d];
    b.device_work = assembled;
    b.gathered = gathered;
    b.pins.assign(w.pins().begin(), w.pins().end());
    b.staged.assign(w.staged().begin(), w.staged().end());
    return b;
  }

  // A submitted batch's units: unpinned; with `failed` (its work never reached the device)
  // also forgotten, so the batches that gather them are read again on the host.
  void submitted(const std::vector<dd::unit_ref>& pins,
                 const std::vector<dd::staged_unit>& staged, bool failed) {
    if (failed)
      for (const dd::staged_unit& s : staged) directory_.failed(s.ref);
    directory_.submitted(pins);
  }

  // At delivery of target slot d's batch: whether its records can be handed out as gathered.
  // `statuses` are its units' (unit_decoder::statuses); a unit that failed is forgotten and its
  // batch, like any batch that gathered from a unit whose decode failed, is read again.
  // Units this batch decoded for later batches are checked whether or not it gathered itself.
  [[nodiscard]] bool check(std::size_t d, const std::vector<std::uint32_t>& statuses) {
    delivered& b = delivered_[d];
    bool good = true;
    for (const dd::staged_unit& s : b.staged)
      for (std::size_t u = s.first_unit; u < s.first_unit + s.unit_count; ++u)
        if (u >= statuses.size() || statuses[u] != dd::unit_ok) {
          directory_.failed(s.ref);
          good = false;
          break;
        }
    for (std::size_t u = 0; good && u < statuses.size(); ++u)
      good = statuses[u] == dd::unit_ok;  // words past the units: the gather's own check
    if (!b.gathered) return true;
    if (good && directory_.poisoned(b.pins)) good = false;
    if (!good) redone_.fetch_add(1, std::memory_order_relaxed);
    return good;
  }
  [[nodiscard]] std::uint64_t redone() const noexcept {
    return redone_.load(std::memory_order_relaxed);
  }

 private:
  device_decode_plan plan_;
  dd::unit_directory directory_;
  std::vector<std::unique_ptr<dd::batch_work>> work_;  // per staging slot
  std::vector<delivered> delivered_;                   // per target slot
  std::map<std::uint64_t, parked_batch> parked_;       // under gate_
  std::mutex gate_;
  std::uint64_t next_ = 0;
  std::atomic<std::uint64_t> redone_{0};  // batches read again at delivery
};

// Stages records [begin, end) of the batch in `slot` for the device, each that cannot be staged
// read on the host into its place (failures to slot.failures), then helps stage the units the
// batch stages ahead. With `order`, positions are order[begin, end). Returns the bytes staged or
// read.
template <class Reader>
std::uint64_t stage_records(Reader& reader, staging_slot& slot, const slot_layout& l,
                            std::size_t begin, std::size_t end, const std::size_t* order,
                            dd::batch_work& w, dd::unit_directory& dir, std::uint64_t& failures) {
  std::byte* base = slot.buffer.data();
  const std::uint64_t* idx = slot_layout::indices(base, l);
  const std::uint64_t* off = slot_layout::offsets(base, l);
  std::byte* data = slot_layout::data(base, l);
  std::uint64_t bytes = 0;
  for (std::size_t j = begin; j < end; ++j) {
    const std::size_t k = order ? order[j] : j;
    const std::uint64_t n = off[k + 1] - off[k];
    if (reader.stage_device(idx[k], off[k], w, dir)) {
      bytes += n;
      continue;
    }
    w.host_record();
    try {
      reader.read(idx[k], std::span<std::byte>(data + off[k], n));
      bytes += n;
    } catch (...) {
      ++failures;
      std::lock_guard lock(slot.failure_mutex);
      slot.failures.push_back(record_failure{k, std::current_exception()});
    }
  }
  reader.stage_device_ahead(w, dir);
  return bytes;
}

}  // namespace gpufeed::detail::loading
