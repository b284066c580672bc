// The loader's slot ledger alone (slot_ledger.hpp): every staging slot, target slot and window
// credit taken and returned through it, a second return refused and counted, blocked takers woken
// by a return or by close(). And the keying of worker telemetry and trace tracks by worker id.
#include <doctest/doctest.h>

#include <cstddef>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/detail/loader/slot_ledger.hpp"
#include "gpufeed/detail/loader/telemetry.hpp"
#include "gpufeed/detail/loader/trace.hpp"

namespace loading = gpufeed::detail::loading;

using loading::slot_ledger;
using loading::worker_id;

namespace {

auto no_reclaim = [](std::vector<std::size_t>&) {};

std::stop_token stopped() {
  static std::stop_source s;
  s.request_stop();
  return s.get_token();
}

}  // namespace

TEST_CASE("slot_ledger: every slot and credit starts free and is counted out and back") {
  slot_ledger l(2, 3, 2);
  CHECK(l.take_credit({}));
  CHECK(l.take_credit({}));
  CHECK_FALSE(l.take_credit(stopped()));  // both credits out
  CHECK(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(0));
  CHECK(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(1));
  CHECK_FALSE(l.take_staging(stopped(), false, no_reclaim).has_value());
  for (std::size_t d = 0; d < 3; ++d) CHECK(l.take_target({}) == std::optional<std::size_t>(d));
  CHECK_FALSE(l.take_target(stopped()).has_value());

  l.return_credit();
  l.return_staging(1);
  l.return_target(2);
  l.return_target(0);
  CHECK(l.take_credit({}));
  CHECK(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(1));
  CHECK(l.take_target({}) == std::optional<std::size_t>(2));  // first returned, first taken
  CHECK(l.take_target({}) == std::optional<std::size_t>(0));

  CHECK(l.credits().taken == 3);
  CHECK(l.credits().returned == 1);
  CHECK(l.staging().taken == 3);
  CHECK(l.staging().returned == 1);
  CHECK(l.target().taken == 5);
  CHECK(l.target().returned == 2);
  CHECK(l.double_returns() == 0);
}

TEST_CASE("slot_ledger: a staging slot whose copy was queued comes back through reclaim") {
  slot_ledger l(2, 1, 1);
  REQUIRE(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(0));
  REQUIRE(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(1));
  int polls = 0;
  const auto reclaim = [&](std::vector<std::size_t>& done) {
    if (++polls == 3) done.push_back(1);  // the copy out of slot 1 finished
  };
  CHECK(l.take_staging({}, false, reclaim) == std::optional<std::size_t>(1));
  CHECK(polls == 3);
  CHECK(l.staging().returned == 1);
  // An engine handing the same slot back twice: the second is a double return, not a second
  // free slot.
  const auto twice = [](std::vector<std::size_t>& done) { done.insert(done.end(), {1, 1}); };
  CHECK(l.take_staging(stopped(), false, twice) == std::optional<std::size_t>(1));
  CHECK(l.double_returns() == 1);
  CHECK_FALSE(l.take_staging(stopped(), false, no_reclaim).has_value());
  CHECK(l.staging().returned == 2);
}

TEST_CASE("slot_ledger: a second return is refused and counted, never queued twice") {
  slot_ledger l(2, 2, 1);
  REQUIRE(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(0));
  REQUIRE(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(1));
  l.return_staging(0);
  l.return_staging(0);
  CHECK(l.double_returns() == 1);
  CHECK(l.take_staging({}, false, no_reclaim) == std::optional<std::size_t>(0));
  // Queued twice, slot 0 would now be handed to a second batch.
  CHECK_FALSE(l.take_staging(stopped(), false, no_reclaim).has_value());

  l.return_target(1);  // never taken
  l.return_target(7);  // no such slot
  CHECK(l.double_returns() == 3);
  REQUIRE(l.take_target({}) == std::optional<std::size_t>(0));
  REQUIRE(l.take_target({}) == std::optional<std::size_t>(1));
  CHECK_FALSE(l.take_target(stopped()).has_value());
  l.return_target(1);
  l.return_target(1);
  CHECK(l.double_returns() == 4);

  l.return_credit();  // none out
  CHECK(l.double_returns() == 5);
  REQUIRE(l.take_credit({}));
  CHECK_FALSE(l.take_credit(stopped()));
  l.return_credit();
  l.return_credit();
  CHECK(l.double_returns() == 6);
  CHECK(l.credits().taken == 1);
  CHECK(l.credits().returned == 1);
  CHECK(l.staging().returned == 1);
  CHECK(l.target().returned == 1);
}

TEST_CASE("slot_ledger: a planner waiting for a staging slot wakes on a return; close ends waits") {
  slot_ledger l(1, 1, 1);
  REQUIRE(l.take_staging({}, true, no_reclaim) == std::optional<std::size_t>(0));
  std::optional<std::size_t> got;
  std::thread planner([&] { got = l.take_staging({}, true, no_reclaim); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  l.return_staging(0);  // wakes the in-place wait, which otherwise waits for ever
  planner.join();
  CHECK(got == std::optional<std::size_t>(0));

  REQUIRE(l.take_target({}).has_value());
  REQUIRE(l.take_credit({}));
  std::optional<std::size_t> target{42};
  bool credit = true;
  std::thread worker([&] { target = l.take_target({}); });
  std::thread planner2([&] { credit = l.take_credit({}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  l.close();
  worker.join();
  planner2.join();
  CHECK_FALSE(target.has_value());
  CHECK_FALSE(credit);
}

TEST_CASE("telemetry: counters are keyed by worker id") {
  loading::telemetry m(3);
  m.worker(worker_id(2)).records.store(20);
  m.worker(worker_id(0)).records.store(5);
  CHECK_THROWS_AS((void)m.worker(worker_id(3)), std::logic_error);
  gpufeed::loader_stats s;
  m.snapshot(s);
  REQUIRE(s.workers.size() == 3);
  CHECK(s.workers[0].records == 5);
  CHECK(s.workers[1].records == 0);
  CHECK(s.workers[2].records == 20);
}

TEST_CASE("tracer: worker tracks are keyed by id; the planner's and consumer's are their own") {
  loading::tracer off(2, 0);
  CHECK(off.worker(worker_id(0)) == nullptr);
  CHECK(off.planner() == nullptr);
  off.add(off.planner(), "plan", 0, 1, 0);  // a no-op
  CHECK(off.dropped() == 0);

  loading::tracer t(2, 1);
  REQUIRE(t.worker(worker_id(1)) != nullptr);
  CHECK(t.worker(worker_id(1))->name() == "worker 1");
  CHECK(t.worker(worker_id(2)) == nullptr);
  CHECK(t.planner()->name() == "planner");
  CHECK(t.consumer()->name() == "consumer");
  t.add(t.worker(worker_id(1)), "read", 1000, 2000, 7);
  t.add(t.planner(), "plan", 1000, 1500, 7);
  t.add(t.planner(), "plan", 1500, 1600, 8);  // past the capacity of 1: dropped
  t.add(t.worker(worker_id(5)), "read", 0, 1, 0);  // no such worker: not kept
  CHECK(t.dropped() == 1);
  std::ostringstream os;
  t.write(os, {}, 0);
  const std::string json = os.str();
  // Workers in id order, then the planner and the consumer.
  const auto w0 = json.find("\"worker 0\""), w1 = json.find("\"worker 1\"");
  const auto p = json.find("\"planner\""), c = json.find("\"consumer\"");
  REQUIRE(w0 != std::string::npos);
  CHECK(w0 < w1);
  CHECK(w1 < p);
  CHECK(p < c);
  CHECK(json.find(R"("name":"read","ph":"X","pid":1,"tid":1,)") != std::string::npos);
  CHECK(json.find(R"("name":"plan","ph":"X","pid":1,"tid":2,)") != std::string::npos);
}
