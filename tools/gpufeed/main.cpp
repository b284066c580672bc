// gpufeed — pack small files into shards, inspect them, measure how fast this machine feeds
// them to the GPU, check the machine.
//
// Exit status, for every subcommand: 0 success (and --help, --version); 1 the command ran and
// failed (one line on stderr says why); 2 a usage error (unknown option, missing or invalid
// argument: CLI11's message and "Run with --help" on stderr).
#include <cstdio>
#include <exception>

#include "commands.hpp"

#ifndef GPUFEED_CLI_VERSION
#error "GPUFEED_CLI_VERSION (the CMake project version) must be defined by the build"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gpufeed: keep GPUs fed. Pack files into HDF5/LMDB shards, inspect them, measure "
               "how fast this machine feeds them to the GPU, check the machine."};
  app.require_subcommand(1);
  app.footer("Exit status: 0 done, 1 the command failed (one line on stderr says why), 2 a usage "
             "error. `gpufeed COMMAND --help` describes each command.");
  app.set_version_flag("--version", std::string("gpufeed ") + GPUFEED_CLI_VERSION,
                       "print the gpufeed version and exit");
  gpufeed::cli::add_pack(app);
  gpufeed::cli::add_inspect(app);
  gpufeed::cli::add_bench(app);
  gpufeed::cli::add_doctor(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return app.exit(e);  // a subcommand's failure, already reported on stderr (exit 1)
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; every other parse error is a usage error.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : gpufeed::cli::usage_exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufeed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
