// gpufeed doctor — placeholder until its implementation lands; refuses to run.
#include <stdexcept>

#include "commands.hpp"

namespace gpufeed::cli {
void add_doctor(CLI::App& app) {
  app.add_subcommand("doctor", "(not built yet)")->callback([] {
    throw std::runtime_error("'gpufeed doctor' is not implemented in this build");
  });
}
}  // namespace gpufeed::cli
