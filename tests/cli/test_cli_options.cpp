// Every option of every `gpufeed` subcommand parses the same way as `--opt=VALUE` and as
// `--opt VALUE`: the subcommands are registered as the CLI registers them (add_pack, ...), parsed without
// running them, and the parsed state (every option's count and values) compared between the
// two forms (CLI11 stores sizes converted and splits lists, so the comparison is of what the
// command would see). The options are enumerated from the registered subcommands, so an option added later
// is covered without editing this test.
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

const std::map<std::string, std::vector<std::string>> base_args = {
    {"pack", {"pack", "-o", "out"}},
    {"inspect", {"inspect", "shard.h5"}},
    {"bench", {"bench", "shards"}},
    {"doctor", {"doctor"}},
};

// A value each option's check accepts (anything else takes "x7").
std::string value_for(const std::string& name) {
  static const std::map<std::string, std::string> v = {
      {"--format", "lmdb"},      {"--compress", "zstd:5"},  {"--order", "sequential"},
      {"--shard-size", "2MiB"},  {"--chunk-size", "64KiB"}, {"--deflate", "3"},
      {"--seed", "7"},           {"--threads", "3"},        {"--seconds", "2"},
      {"--workers", "3"},      {"--prefetch", "4"},       {"--max-gib", "2"},
      {"--loader-seconds", "2"}, {"--output", "dir2"},       {"--cache-mib", "16"},
  };
  const auto it = v.find(name);
  return it == v.end() ? "x7" : it->second;
}

// Thrown by the main app's parse-complete callback, which CLI11 runs after parsing and before
// any subcommand's callback: the command is parsed, never run.
struct parsed_only {};

void register_all(CLI::App& app) {
  app.require_subcommand(1);
  gpufeed::cli::add_pack(app);
  gpufeed::cli::add_inspect(app);
  gpufeed::cli::add_bench(app);
  gpufeed::cli::add_doctor(app);
  app.parse_complete_callback([] { throw parsed_only{}; });
}

// Parses args (argv[1...]) and describes the named subcommand's state: every option's count and
// values, one line each.
std::string parsed_state(const std::vector<std::string>& args, const std::string& command) {
  CLI::App app;
  register_all(app);
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
    FAIL("the subcommand's callback was not stopped");
  } catch (const parsed_only&) {
  }
  std::string state;
  for (const CLI::Option* o : app.get_subcommand(command)->get_options()) {
    state += o->get_name() + " " + std::to_string(o->count()) + ":";
    for (const auto& r : o->results()) state += " [" + r + "]";
    state += "\n";
  }
  return state;
}

}  // namespace

TEST_CASE("every option of every subcommand parses the same with '=' and with a space") {
  CLI::App app;
  register_all(app);
  std::size_t covered = 0;
  for (CLI::App* sub : app.get_subcommands({})) {
    const std::string command = sub->get_name();
    REQUIRE(base_args.count(command) == 1);
    for (const CLI::Option* o : sub->get_options()) {
      if (o->get_lnames().empty() || o->get_expected_max() == 0) continue;  // positional, flag
      const std::string name = "--" + o->get_lnames().front();
      const std::string value = value_for(name);
      CAPTURE(command);
      CAPTURE(name);
      std::vector<std::string> base = base_args.at(command);
      if (name == "--output") base = {"pack"};  // the option under test is the base's -o
      std::vector<std::string> eq = base, space = base;
      eq.push_back(name + "=" + value);
      space.push_back(name);
      space.push_back(value);
      std::string a, b;
      CHECK_NOTHROW(a = parsed_state(eq, command));
      CHECK_NOTHROW(b = parsed_state(space, command));
      CHECK(a == b);
      // The value reached the option in both forms (a flag would have dropped it); sizes are
      // stored converted and lists split, so only the first characters are compared.
      CHECK(a.find(o->get_name() + " 1: [" + value.substr(0, 1)) != std::string::npos);
      ++covered;
    }
  }
  // pack, inspect, bench and doctor options that take values: a floor, so that a registration
  // that silently lost its options fails here.
  CHECK(covered >= 25);
}

TEST_CASE("pack --labels alone still means the label dataset 'labels' / folder labels") {
  const std::string alone = parsed_state({"pack", "in", "-o", "out", "--labels"}, "pack");
  CHECK(alone.find("--labels 1:") != std::string::npos);
  CHECK(alone.find("--labels 1: [in]") == std::string::npos);  // the directory stays input
  CHECK(alone.find("input 1: [in]") != std::string::npos);
  // Before -o: -o is an option, not the label dataset's name.
  const std::string before = parsed_state({"pack", "in", "--labels", "-o", "out"}, "pack");
  CHECK(before.find("--output 1: [out]") != std::string::npos);
}

TEST_CASE("pack --from F --labels=y and --labels y both name label dataset y") {
  const std::vector<std::string> base = {"pack", "--from", "f.h5", "--dataset=x", "-o", "out"};
  std::vector<std::string> eq = base, space = base;
  eq.push_back("--labels=y");
  space.push_back("--labels");
  space.push_back("y");
  const std::string a = parsed_state(eq, "pack"), b = parsed_state(space, "pack");
  CAPTURE(a);
  CHECK(a == b);
  CHECK(a.find("--labels 1: [y]") != std::string::npos);
  CHECK(a.find("--dataset 1: [x]") != std::string::npos);
}
