// The loader's pieces that are testable alone: config resolution, task splitting, the ready
// queue, the host engine.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <string>
#include <vector>

#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/delivery.hpp"
#include "gpufeed/detail/loader/planning.hpp"
#include "gpufeed/target.hpp"

namespace loading = gpufeed::detail::loading;

using namespace gpufeed;

namespace {

struct fixed_source {  // 100 records of 16 bytes
  std::uint64_t size() const { return 100; }
  std::size_t record_size(std::uint64_t) const { return 16; }
  std::size_t fixed_record_size() const { return 16; }
  void read(std::uint64_t, std::span<std::byte>) const {}
};

struct unit_source : fixed_source {  // decode units of 5 records
  std::uint64_t decode_unit(std::uint64_t i) const { return i / 5; }
};

struct one_unit_source : fixed_source {  // every record in one decode unit
  std::uint64_t decode_unit(std::uint64_t) const { return 0; }
};

struct own_unit_source : fixed_source {  // decode units of one record: nothing to decode
  std::uint64_t decode_unit(std::uint64_t i) const { return i; }
};

struct labeled_fixed_source : fixed_source {  // label i = 1000 - i
  bool has_labels() const { return true; }
  std::int64_t label(std::uint64_t i) const { return 1000 - static_cast<std::int64_t>(i); }
};

std::string config_message(const loader_config& c) {
  try {
    (void)loading::resolve_config<loader_options<>>(fixed_source{}, c, 8);
  } catch (const config_error& e) {
    return e.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("resolve_config: automatic knobs get their values, fixed ones win") {
  loader_config c;
  c.batch_size = 10;
  c.part = partition{};
  const auto a = loading::resolve_config<loader_options<>>(fixed_source{}, c, 8);
  CHECK(a.config.workers == 6);  // cores - 2
  CHECK(a.config.prefetch == 8);
  CHECK(a.config.streams == 2);
  CHECK(a.config.slot_data_bytes == 160);
  CHECK(a.record_bytes == 16);
  CHECK(a.config.chunk_records == loading::auto_chunk(10, 160, 6, 8));
  CHECK(a.order.batches_per_epoch() == 10);
  CHECK(a.start == sampler_state{0, 0, 0});
  c.workers = 3;
  c.chunk_records = 4;
  const auto b = loading::resolve_config<loader_options<dynamic, 2, 1>>(fixed_source{}, c, 8);
  CHECK(b.config.workers == 3);
  CHECK(b.config.prefetch == 2);
  CHECK(b.config.streams == 1);
  CHECK(b.config.chunk_records == 4);
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 1).config.workers == 3);
  c.workers = 0;
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 1).config.workers == 1);
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 3).config.workers == 1);
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 4).config.workers == 2);
}

TEST_CASE("resolve_config: automatic prefetch on a GPU target keeps the staging ring in cache") {
  constexpr std::size_t mib = std::size_t{1} << 20;
  // max(64 MiB, a third of the last-level cache) of slots, 2 to 8.
  CHECK(loading::auto_prefetch(8 * mib, 0) == 8);
  CHECK(loading::auto_prefetch(16 * mib, 0) == 4);
  CHECK(loading::auto_prefetch(16 * mib, 300 * mib) == 6);
  CHECK(loading::auto_prefetch(32 * mib, 300 * mib) == 3);
  CHECK(loading::auto_prefetch(16 * mib, 512 * mib) == 8);
  CHECK(loading::auto_prefetch(64 * mib, 300 * mib) == 2);
  CHECK(loading::auto_prefetch(1024 * mib, 300 * mib) == 2);
  CHECK(loading::auto_prefetch(1, 300 * mib) == 8);

  // 100 records of 16 bytes, batches of 10, with slot_data_bytes setting the slots' size. The
  // engine factory is never called: resolving builds no engine.
  const target gpu([]() -> std::unique_ptr<transfer_engine> { return nullptr; }, 0, "fake:0");
  loader_config c;
  c.batch_size = 10;
  c.part = partition{};
  c.target = gpu;
  c.slot_data_bytes = 64 * mib;
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 8, 300 * mib)
            .config.prefetch == 2);
  c.slot_data_bytes = 4 * mib;
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 8, 300 * mib)
            .config.prefetch == 8);
  c.slot_data_bytes = 32 * mib;
  c.prefetch = 6;  // set by the user: kept
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 8, 300 * mib)
            .config.prefetch == 6);
  c.prefetch = 0;  // fixed in the type: kept
  CHECK(loading::resolve_config<loader_options<dynamic, 5, dynamic>>(fixed_source{}, c, 8,
                                                                     300 * mib)
            .config.prefetch == 5);
  c.target = target::host();  // no copy from pinned slots: the default depth
  CHECK(loading::resolve_config<loader_options<>>(fixed_source{}, c, 8, 300 * mib)
            .config.prefetch == 8);
}

TEST_CASE("resolve_config: a fixed loader_options value cannot be overridden by loader_config") {
  // loader_options are typed values read once into the run-time config (loader_config.hpp): a
  // fixed one is used and loader_config's field of the same name is ignored, not an override.
  loader_config c;
  c.batch_size = 10;
  c.part = partition{};
  c.workers = 7;
  c.prefetch = 5;
  c.streams = 3;
  const auto fixed = loading::resolve_config<loader_options<2, 4, 1>>(fixed_source{}, c, 8);
  CHECK(fixed.config.workers == 2);
  CHECK(fixed.config.prefetch == 4);
  CHECK(fixed.config.streams == 1);
  const auto deferred = loading::resolve_config<loader_options<>>(fixed_source{}, c, 8);
  CHECK(deferred.config.workers == 7);
  CHECK(deferred.config.prefetch == 5);
  CHECK(deferred.config.streams == 3);
  // The presets are the same values in a type.
  const auto preset = loading::resolve_config<io_bound_options>(fixed_source{}, c, 8);
  CHECK(preset.config.workers == 16);
  CHECK(preset.config.prefetch == 8);
  CHECK(preset.config.streams == 2);
}

TEST_CASE("resolve_config: bad settings are config_errors that name the setting") {
  loader_config c;
  c.part = partition{};
  c.batch_size = 0;
  CHECK(config_message(c) == "batch_size must be at least 1");
  c.batch_size = 10;
  c.max_held_batches = 0;
  CHECK(config_message(c) == "max_held_batches must be at least 1");
  c.max_held_batches = 2;
  c.transform_output_bytes = 8;
  CHECK(config_message(c) == "transform_output_bytes given without a transform");
  c.transform_output_bytes = 0;
  c.resume = sampler_state{1, 0, 101};
  CHECK(config_message(c) == "resume state names position 101 but an epoch has 100 records");
  c.resume.reset();
  c.batch_size = 101;
  c.drop_last = true;
  CHECK(config_message(c).find("no full batch of 101 records") == 0);
}

TEST_CASE("split_tasks: chunk_records positions per task, or on to the end of a decode unit") {
  std::vector<std::uint64_t> idx(23);
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = k;
  std::vector<loading::chunk_task> t;
  loading::split_tasks(fixed_source{}, 3, idx.data(), idx.size(), 4, true, t);
  REQUIRE(t.size() == 6);
  for (std::size_t k = 0; k < t.size(); ++k) {
    CHECK(t[k].slot == 3);
    CHECK(t[k].begin == 4 * k);
    CHECK(t[k].end == std::min<std::size_t>(23, 4 * k + 4));
  }
  // Units of 5: a task of 4 runs on to its unit's end ([0,5) [5,10) ...), the last ends at 23.
  loading::split_tasks(unit_source{}, 0, idx.data(), idx.size(), 4, true, t);
  REQUIRE(t.size() == 5);
  CHECK(t[0].end == 5);
  CHECK(t[1].begin == 5);
  CHECK(t[1].end == 10);
  CHECK(t.back().end == 23);
  // At most 8 x chunk_records per task, even within one unit.
  loading::split_tasks(one_unit_source{}, 0, idx.data(), idx.size(), 2, true, t);
  REQUIRE(t.size() == 2);
  CHECK(t[0].end == 16);
  CHECK(t[1].begin == 16);
  CHECK(t[1].end == 23);
  loading::split_tasks(unit_source{}, 0, idx.data(), idx.size(), 4, false, t);
  CHECK(t.size() == 6);  // unit_tasks off: plain chunks
}

TEST_CASE("resolve_config: block_shuffled sorts a batch's reads only where units hold records") {
  loader_config c;
  c.batch_size = 10;
  c.order = sample_order::block_shuffled;
  const auto shared = loading::resolve_config<loader_options<>>(unit_source{}, c, 8);
  CHECK(shared.sorted_tasks);
  CHECK(shared.records_per_decode_unit == 5);
  const auto own = loading::resolve_config<loader_options<>>(own_unit_source{}, c, 8);
  CHECK_FALSE(own.sorted_tasks);  // the sort would cost the planner and gain nothing
  CHECK(own.records_per_decode_unit == 1);
  CHECK_FALSE(loading::resolve_config<loader_options<>>(fixed_source{}, c, 8).sorted_tasks);
  c.order = sample_order::shuffled;
  CHECK_FALSE(loading::resolve_config<loader_options<>>(unit_source{}, c, 8).sorted_tasks);
}

TEST_CASE("tasks_fill_records: tasks filling their parts of a batch write what the planner would") {
  // Fixed-size records without a transform: the planner sets the batch's shape and offsets, and
  // each worker task fills its records' indices and labels. The offsets are final before any
  // task runs (a task reads its last record's end offset, the next task's first), and a task
  // writes only its own positions. Parts filled in any order, over every order, world size and
  // the epoch's short last batch, equal plan_batch()'s slot.
  const labeled_fixed_source src;
  for (const auto order :
       {sample_order::shuffled, sample_order::sequential, sample_order::block_shuffled}) {
    for (const std::uint32_t world : {1u, 3u}) {
      const std::string order_name = to_string(order);
      CAPTURE(order_name);
      CAPTURE(world);
      loader_config c;
      c.batch_size = 16;
      c.order = order;
      c.shuffle_window = 2;
      c.part = partition{world - 1, world};
      const auto p = loading::resolve_config<loader_options<>>(src, c, 8);
      REQUIRE(p.tasks_fill_records);
      REQUIRE(p.labels);
      const loading::slot_layout l = p.layout();
      loading::staging_slot whole, parts;
      whole.buffer = resource_buffer(std::pmr::new_delete_resource(), l.slot_bytes());
      parts.buffer = resource_buffer(std::pmr::new_delete_resource(), l.slot_bytes());
      std::size_t batches = 0;
      for (sampler_state at = p.start; at.epoch < 2; at = p.order.advance(at), ++batches) {
        for (auto* s : {&whole, &parts}) {
          s->meta = batch_meta{};
          s->meta.epoch = at.epoch;
          s->meta.position = at.position;
        }
        std::byte* w = whole.buffer.data();
        std::byte* q = parts.buffer.data();
        constexpr std::uint64_t poison = 0xababababababababull;
        std::memset(q, 0xab, l.slot_bytes());
        loading::plan_batch(src, p, whole);
        loading::plan_batch_shape(p, parts);
        REQUIRE(parts.meta.records == whole.meta.records);
        CHECK(parts.meta.data_bytes == whole.meta.data_bytes);
        const std::size_t n = parts.meta.records;
        for (std::size_t k = 0; k <= n; ++k)  // before any task
          REQUIRE(loading::slot_layout::offsets(q, l)[k] ==
                  loading::slot_layout::offsets(w, l)[k]);
        for (std::size_t b = n; b > 0;) {  // last part first, parts of 5
          const std::size_t a = b > 5 ? b - 5 : 0;
          loading::fill_task_records(src, p, parts, a, b);
          if (a > 0) {  // the part before is not written yet
            CHECK(loading::slot_layout::indices(q, l)[a - 1] == poison);
            CHECK(static_cast<std::uint64_t>(loading::slot_layout::labels(q, l)[a - 1]) == poison);
          }
          b = a;
        }
        for (std::size_t k = 0; k < n; ++k) {
          CHECK(loading::slot_layout::indices(q, l)[k] == loading::slot_layout::indices(w, l)[k]);
          CHECK(loading::slot_layout::labels(q, l)[k] == loading::slot_layout::labels(w, l)[k]);
          CHECK(loading::slot_layout::offsets(q, l)[k] == loading::slot_layout::offsets(w, l)[k]);
        }
        CHECK(loading::slot_layout::offsets(q, l)[n] == loading::slot_layout::offsets(w, l)[n]);
      }
      CHECK(batches >= 2 * p.order.batches_per_epoch());
    }
  }
  // Not for records of varying size, record transforms, or tasks cut by decode unit.
  loader_config c;
  c.batch_size = 10;
  c.order = sample_order::sequential;
  CHECK_FALSE(loading::resolve_config<loader_options<>>(unit_source{}, c, 8).tasks_fill_records);
  CHECK(loading::resolve_config<loader_options<>>(own_unit_source{}, c, 8).tasks_fill_records);
}

TEST_CASE("ready_queue: delivers in sequence order, ends, and bounds batches held") {
  loading::ready_queue q(2, 4);
  auto entry = [](std::uint64_t seq) {
    loading::ready_entry e;
    e.meta.sequence = seq;
    e.slot = seq % 4;
    e.has_slot = true;
    return e;
  };
  q.put(entry(1));
  q.put(entry(0));
  CHECK(q.take()->entry.meta.sequence == 0);
  CHECK(q.take()->entry.meta.sequence == 1);
  q.put(entry(2));
  CHECK_THROWS_AS(q.take(), config_error);  // two held
  (void)q.released(0);
  CHECK(q.take()->entry.meta.sequence == 2);
  CHECK(q.last_taken()->sequence == 2);
  q.end_at(3);
  (void)q.released(1);
  CHECK_FALSE(q.take().has_value());
  q.stop();
}

TEST_CASE("host_engine: delivers in the staging slot and returns it on release") {
  host_engine e;
  CHECK(e.delivers_in_place());
  CHECK(e.probe() == nullptr);
  e.configure(64, 8, 2, 1);
  std::vector<std::byte> staging(64);
  e.copy(1, 0, staging.data(), 64, 7);
  CHECK(e.slot(1).data == staging.data());
  CHECK(e.slot(1).output != nullptr);
  std::vector<std::size_t> done;
  CHECK(e.reclaim(done) == 0);  // held until released
  e.release(1, nullptr);
  CHECK(e.reclaim(done) == 1);
  CHECK(done == std::vector<std::size_t>{7});
  // A failing hook frees the staging slot too.
  e.copy(0, 0, staging.data(), 64, 5);
  transform_hook bad = [](const batch_view&, stream_handle) { throw config_error("bad"); };
  CHECK_THROWS_AS(e.complete(0, 0, bad, batch_view{}), config_error);
  done.clear();
  CHECK(e.reclaim(done) == 1);
  CHECK(done == std::vector<std::size_t>{5});
}
