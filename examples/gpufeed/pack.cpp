// gpufeed pack — placeholder until its implementation lands; refuses to run.
#include <stdexcept>

#include "commands.hpp"

namespace gpufeed::cli {
void add_pack(CLI::App& app) {
  app.add_subcommand("pack", "(not built yet)")->callback([] {
    throw std::runtime_error("'gpufeed pack' is not implemented in this build");
  });
}
}  // namespace gpufeed::cli
