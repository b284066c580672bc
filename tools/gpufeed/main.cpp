// gpufeed — pack small files into shards, inspect shards, check the machine.
#include <cstdio>
#include <exception>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gpufeed: keep GPUs fed. Pack files into HDF5/LMDB shards, inspect them, check "
               "the machine."};
  app.require_subcommand(1);
  gpufeed::cli::add_pack(app);
  gpufeed::cli::add_inspect(app);
  gpufeed::cli::add_doctor(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufeed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
