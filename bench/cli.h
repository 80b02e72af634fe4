// Defines parse_or_exit(): a benchmark's command line parsed by CLI11, as ktune's own commands are.
#pragma once

#include <cstdlib>

#include <CLI/CLI.hpp>

namespace ktune::bench {

// Parses argv into the options `app` declares; --help prints the usage and exits 0, a bad option
// or value prints one line and exits 1 (CLI11's exit codes would give 1xx).
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    std::exit(1);
  }
}

}  // namespace ktune::bench
