// The `gpufeed` command-line tool: one subcommand per file, each registered by its add_*.
// Every subcommand is built only on gpufeed's public API.
#pragma once

#include <CLI/CLI.hpp>

namespace gpufeed::cli {

// The exit status of a usage error (bad or missing arguments), as most Unix tools use.
inline constexpr int usage_exit_code = 2;

// Each registers its subcommand and its callback on app. A callback reports failure by
// throwing; main() prints one clear line and exits non-zero.
void add_pack(CLI::App& app);
void add_inspect(CLI::App& app);
void add_bench(CLI::App& app);
void add_doctor(CLI::App& app);

}  // namespace gpufeed::cli
