// gpufeed inspect — placeholder until its implementation lands; refuses to run.
#include <stdexcept>

#include "commands.hpp"

namespace gpufeed::cli {
void add_inspect(CLI::App& app) {
  app.add_subcommand("inspect", "(not built yet)")->callback([] {
    throw std::runtime_error("'gpufeed inspect' is not implemented in this build");
  });
}
}  // namespace gpufeed::cli
