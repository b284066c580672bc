// The doctor's report: statuses, summary, text, and JSON that parses (checked with nlohmann_json)
// whatever the strings hold.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "gpufeed/doctor/report.hpp"

using gpufeed::check_status;
using gpufeed::doctor_check;
using gpufeed::doctor_report;
using json = nlohmann::json;

namespace {
// The JSON text of a one-check report whose summary is s, parsed back.
std::string round_trip_summary(const std::string& s) {
  doctor_report r;
  r.add(doctor_check("x", "X", check_status::pass, s));
  return json::parse(r.to_json_string()).at("checks").at(0).at("summary").get<std::string>();
}
}  // namespace

TEST_CASE("worst status, counts and exit code") {
  doctor_report r;
  CHECK(r.worst() == check_status::skip);
  CHECK(r.exit_code() == 0);
  r.add(doctor_check("a", "A", check_status::skip, "not checked"));
  CHECK(r.worst() == check_status::skip);
  r.add(doctor_check("b", "B", check_status::pass, "fine"));
  CHECK(r.worst() == check_status::pass);
  r.add(doctor_check("c", "C", check_status::warn, "slow"));
  CHECK(r.worst() == check_status::warn);
  CHECK(r.exit_code() == 0);
  r.add(doctor_check("d", "D", check_status::fail, "broken"));
  CHECK(r.worst() == check_status::fail);
  CHECK(r.exit_code() == 1);
  CHECK(r.count(check_status::pass) == 1);
  CHECK(r.count(check_status::skip) == 1);
  REQUIRE(r.find("c") != nullptr);
  CHECK(r.find("c")->summary == "slow");
  CHECK(r.find("nope") == nullptr);
  CHECK(r.summary_line() == "overall: fail (1 passed, 1 warning, 1 failed, 1 skipped)");
}

TEST_CASE("fact and number replace by key; at_least never lowers") {
  doctor_check c("id", "T");
  c.fact("k", "1").fact("j", "2").fact("k", "3");
  REQUIRE(c.facts.size() == 2);
  CHECK(c.facts[0] == std::pair<std::string, std::string>{"k", "3"});
  c.number("n", 1.0).number("n", 2.5);
  REQUIRE(c.numbers.size() == 1);
  CHECK(c.numbers[0].second == 2.5);
  c.at_least(check_status::warn);
  CHECK(c.status == check_status::warn);
  c.at_least(check_status::pass);
  CHECK(c.status == check_status::warn);
  c.at_least(check_status::fail);
  CHECK(c.status == check_status::fail);
}

TEST_CASE("text report names every check with its status, facts and hint") {
  doctor_report r;
  r.add(doctor_check("a", "Alpha", check_status::pass, "all good")).fact("size", "1 GiB");
  r.add(doctor_check("b", "Beta", check_status::fail, "broken", "fix it"));
  const std::string t = r.to_text();
  CHECK(t.find("[PASS] Alpha: all good\n") != std::string::npos);
  CHECK(t.find("size: 1 GiB") != std::string::npos);
  CHECK(t.find("[FAIL] Beta: broken\n") != std::string::npos);
  CHECK(t.find("hint: fix it") != std::string::npos);
  CHECK(t.find("overall: fail") != std::string::npos);
}

TEST_CASE("JSON has every check with every field") {
  doctor_report r;
  r.add(doctor_check("a", "Alpha", check_status::pass, "ok")).fact("f", "v").number("n", 42.5);
  r.add(doctor_check("b", "Beta", check_status::skip, "not checked"));
  const json j = json::parse(r.to_json_string());
  CHECK(j.at("status") == "pass");
  CHECK(j.at("counts").at("pass") == 1);
  CHECK(j.at("counts").at("skip") == 1);
  CHECK(j.at("counts").at("warn") == 0);
  CHECK(j.at("counts").at("fail") == 0);
  REQUIRE(j.at("checks").size() == 2);
  for (const auto& c : j.at("checks")) {
    for (const char* field : {"id", "title", "status", "summary", "hint"}) CHECK(c.at(field).is_string());
    CHECK(c.at("facts").is_object());
    CHECK(c.at("numbers").is_object());
  }
  CHECK(j.at("checks").at(0).at("facts").at("f") == "v");
  CHECK(j.at("checks").at(0).at("numbers").at("n") == 42.5);
  CHECK(j.at("checks").at(1).at("status") == "skip");
  CHECK(json::parse(doctor_report{}.to_json_string()).at("checks").empty());
}

TEST_CASE("JSON string escaping: quotes, backslashes, control characters") {
  CHECK(round_trip_summary("say \"hi\"") == "say \"hi\"");
  CHECK(round_trip_summary("C:\\path\\to") == "C:\\path\\to");
  CHECK(round_trip_summary("a\nb\tc\rd\be\ff") == "a\nb\tc\rd\be\ff");
  std::string controls;
  for (char ch = 1; ch < 0x20; ++ch) controls += ch;
  controls += '\x7f';
  CHECK(round_trip_summary(controls) == controls);
  CHECK(round_trip_summary(std::string("nul\0inside", 10)) == std::string("nul\0inside", 10));
  // The raw text: control characters never appear unescaped.
  doctor_report r;
  r.add(doctor_check("x", "X", check_status::pass, std::string("\x01\x1f\"\\", 4)));
  const std::string text = r.to_json_string();
  CHECK(text.find("\\u0001\\u001f\\\"\\\\") != std::string::npos);
}

TEST_CASE("JSON strings: UTF-8 passes through, invalid bytes become U+FFFD") {
  const std::string utf8 = "caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x9A\x80 \xE4\xB8\xAD";  // café → 🚀 中
  CHECK(round_trip_summary(utf8) == utf8);
  doctor_report r;
  r.add(doctor_check("x", "X", check_status::pass, utf8));
  CHECK(r.to_json_string().find(utf8) != std::string::npos);  // raw, not \u-escaped

  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(round_trip_summary("a\xFF" "b") == "a" + fffd + "b");                // never valid
  CHECK(round_trip_summary("\x80") == fffd);                                  // stray continuation
  CHECK(round_trip_summary("\xC3") == fffd);                                  // truncated at end
  CHECK(round_trip_summary("\xC3(") == fffd + "(");                           // bad continuation
  CHECK(round_trip_summary("\xC0\xAF") == fffd + fffd);                       // overlong '/'
  CHECK(round_trip_summary("\xE0\x80\xAF") == fffd + fffd + fffd);            // overlong 3-byte
  CHECK(round_trip_summary("\xED\xA0\x80") == fffd + fffd + fffd);            // surrogate D800
  CHECK(round_trip_summary("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd); // above U+10FFFF
  CHECK(round_trip_summary("\xF4\x8F\xBF\xBF") == "\xF4\x8F\xBF\xBF");        // U+10FFFF is fine
}

TEST_CASE("JSON numbers round-trip; NaN and infinity become null") {
  doctor_report r;
  auto& c = r.add(doctor_check("x", "X", check_status::pass, "n"));
  c.number("pi", 3.141592653589793).number("big", 1e300).number("tiny", 5e-324).number("neg", -2.0);
  c.number("nan", std::numeric_limits<double>::quiet_NaN());
  c.number("inf", std::numeric_limits<double>::infinity());
  const json n = json::parse(r.to_json_string()).at("checks").at(0).at("numbers");
  CHECK(n.at("pi").get<double>() == 3.141592653589793);
  CHECK(n.at("big").get<double>() == 1e300);
  CHECK(n.at("tiny").get<double>() == 5e-324);
  CHECK(n.at("neg").get<double>() == -2.0);
  CHECK(n.at("nan").is_null());
  CHECK(n.at("inf").is_null());
}

TEST_CASE("every status has a name") {
  CHECK(std::string(gpufeed::to_string(check_status::pass)) == "pass");
  CHECK(std::string(gpufeed::to_string(check_status::warn)) == "warn");
  CHECK(std::string(gpufeed::to_string(check_status::fail)) == "fail");
  CHECK(std::string(gpufeed::to_string(check_status::skip)) == "skip");
}
