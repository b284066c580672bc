// gpufeed — the doctor's report: a list of checks, each with a status and plain-language words,
// printable as text for people and as JSON for scripts.
//
// Checks are added by gpufeed's own check functions (gpufeed/doctor/doctor.hpp for the host,
// gpufeed/cuda/doctor/gpu_checks.hpp for the GPU) and by anyone else: a check is just data, so a program
// can append its own (`report.add(doctor_check(...))`) and print one report.
//
// JSON shape (to_json_string):
//   {"status": "warn", "counts": {"pass": 5, "warn": 1, "fail": 0, "skip": 2},
//    "checks": [{"id": "gpu.h2d", "title": "...", "status": "pass", "summary": "...",
//                "facts": {"pinned 256 MiB": "52.9 GB/s", ...},
//                "numbers": {"pinned_gbps_max": 52.9, ...}, "hint": "..."}, ...]}
// Every check has every field; "facts" and "numbers" may be empty objects and "hint" an empty
// string. Fact and number keys are unique within a check (fact() and number() replace).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufeed/detail/json_writer.hpp"

namespace gpufeed {

// skip: not checked (no GPU, no NVML, no path given), says why; pass: fine; warn: works but
// something limits throughput or looks wrong; fail: broken, gpufeed cannot use it as asked.
enum class check_status { pass, warn, fail, skip };

inline const char* to_string(check_status s) noexcept {
  switch (s) {
    case check_status::pass: return "pass";
    case check_status::warn: return "warn";
    case check_status::fail: return "fail";
    case check_status::skip: return "skip";
  }
  return "fail";
}

// How much a status matters when summarising a report: skip < pass < warn < fail. A skipped
// check found no problem (it found nothing), so it never outweighs a pass.
inline int severity(check_status s) noexcept {
  switch (s) {
    case check_status::skip: return 0;
    case check_status::pass: return 1;
    case check_status::warn: return 2;
    case check_status::fail: return 3;
  }
  return 3;
}

struct doctor_check {
  std::string id;       // stable, for scripts: "gpu.h2d", "storage", ...
  std::string title;    // for people: "Host-to-device copy rate"
  check_status status = check_status::skip;
  std::string summary;  // one plain-language line: what was found
  std::vector<std::pair<std::string, std::string>> facts;  // measured or read values, in order
  std::vector<std::pair<std::string, double>> numbers;     // the same, as numbers, for scripts
  std::string hint;     // what to do about it; empty when nothing needs doing

  doctor_check() = default;
  doctor_check(std::string check_id, std::string check_title, check_status s = check_status::skip,
               std::string check_summary = {}, std::string check_hint = {})
      : id(std::move(check_id)),
        title(std::move(check_title)),
        status(s),
        summary(std::move(check_summary)),
        hint(std::move(check_hint)) {}

  // Sets a fact (replacing one with the same key) and returns *this for chaining.
  doctor_check& fact(std::string key, std::string value) {
    set(facts, std::move(key), std::move(value));
    return *this;
  }
  doctor_check& number(std::string key, double value) {
    set(numbers, std::move(key), value);
    return *this;
  }
  // Raises the status to s if s is more severe (never lowers it).
  doctor_check& at_least(check_status s) {
    if (severity(s) > severity(status)) status = s;
    return *this;
  }

 private:
  template <class V>
  static void set(std::vector<std::pair<std::string, V>>& v, std::string key, V value) {
    for (auto& kv : v)
      if (kv.first == key) {
        kv.second = std::move(value);
        return;
      }
    v.emplace_back(std::move(key), std::move(value));
  }
};

class doctor_report {
 public:
  std::vector<doctor_check> checks;

  // Appends a check and returns it (the reference is valid until the next add).
  doctor_check& add(doctor_check check) {
    checks.push_back(std::move(check));
    return checks.back();
  }

  // The check with this id, or nullptr.
  [[nodiscard]] const doctor_check* find(std::string_view id) const noexcept {
    for (const auto& c : checks)
      if (c.id == id) return &c;
    return nullptr;
  }

  // The most severe status (see severity()); skip for an empty report.
  [[nodiscard]] check_status worst() const noexcept {
    check_status w = check_status::skip;
    for (const auto& c : checks)
      if (severity(c.status) > severity(w)) w = c.status;
    return w;
  }

  [[nodiscard]] std::size_t count(check_status s) const noexcept {
    return static_cast<std::size_t>(
        std::count_if(checks.begin(), checks.end(), [s](const doctor_check& c) { return c.status == s; }));
  }

  // 1 when a check failed, else 0: the doctor's documented exit status.
  [[nodiscard]] int exit_code() const noexcept { return count(check_status::fail) ? 1 : 0; }

  // For people: one block per check, status first, then facts and hint indented.
  [[nodiscard]] std::string to_text() const {
    static constexpr std::array<const char*, 4> label = {"PASS", "WARN", "FAIL", "SKIP"};
    std::string out;
    for (const auto& c : checks) {
      out += "[";
      out += label[static_cast<std::size_t>(c.status)];
      out += "] " + c.title + ": " + c.summary + "\n";
      for (const auto& [k, v] : c.facts) out += "         " + k + ": " + v + "\n";
      if (!c.hint.empty()) out += "         hint: " + c.hint + "\n";
    }
    // Appended piecewise: `"\n" + std::string&&` trips g++ 12's -Wrestrict false positive at -O3.
    out += '\n';
    out += summary_line();
    out += '\n';
    return out;
  }

  // "overall: warn (5 passed, 1 warning, 0 failed, 2 skipped)".
  [[nodiscard]] std::string summary_line() const {
    auto n = [this](check_status s) { return std::to_string(count(s)); };
    const std::size_t warns = count(check_status::warn);
    return std::string("overall: ") + to_string(worst()) + " (" + n(check_status::pass) +
           " passed, " + std::to_string(warns) + (warns == 1 ? " warning, " : " warnings, ") +
           n(check_status::fail) + " failed, " + n(check_status::skip) + " skipped)";
  }

  // For scripts: the shape documented at the top of this header.
  [[nodiscard]] std::string to_json_string() const {
    using detail::append_json_number;
    using detail::append_json_string;
    std::string o = "{\"status\": ";
    append_json_string(o, to_string(worst()));
    o += ", \"counts\": {";
    for (auto s : {check_status::pass, check_status::warn, check_status::fail, check_status::skip}) {
      if (s != check_status::pass) o += ", ";
      append_json_string(o, to_string(s));
      o += ": " + std::to_string(count(s));
    }
    o += "}, \"checks\": [";
    for (std::size_t i = 0; i < checks.size(); ++i) {
      const auto& c = checks[i];
      o += i ? ",\n  {" : "\n  {";
      o += "\"id\": ";
      append_json_string(o, c.id);
      o += ", \"title\": ";
      append_json_string(o, c.title);
      o += ", \"status\": ";
      append_json_string(o, to_string(c.status));
      o += ", \"summary\": ";
      append_json_string(o, c.summary);
      o += ", \"facts\": {";
      for (std::size_t k = 0; k < c.facts.size(); ++k) {
        if (k) o += ", ";
        append_json_string(o, c.facts[k].first);
        o += ": ";
        append_json_string(o, c.facts[k].second);
      }
      o += "}, \"numbers\": {";
      for (std::size_t k = 0; k < c.numbers.size(); ++k) {
        if (k) o += ", ";
        append_json_string(o, c.numbers[k].first);
        o += ": ";
        append_json_number(o, c.numbers[k].second);
      }
      o += "}, \"hint\": ";
      append_json_string(o, c.hint);
      o += "}";
    }
    o += checks.empty() ? "]}\n" : "\n]}\n";
    return o;
  }
};

}  // namespace gpufeed
