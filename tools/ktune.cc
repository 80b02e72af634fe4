// The `ktune` command: global flags, the subcommands registered by the cmd_*.cc files, and the
// one place where a ktune::Error becomes one line on stderr and a non-zero exit status.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "support/error.h"
#include "support/logging.h"
#include "support/version.h"
#include "tools/commands.h"
#include "tools/environment.h"

namespace ktune::tools {
namespace {

std::vector<std::pair<std::string, CommandAdder>>& registry() {
  static std::vector<std::pair<std::string, CommandAdder>> commands;
  return commands;
}

std::string version_text() {
  return std::string("ktune ") + kVersion + "\n" + "  LLVM    " + KTUNE_LLVM_VERSION + "\n" +
         "  XGBoost " + KTUNE_XGBOOST_VERSION + "\n" + "  gRPC    " + KTUNE_GRPC_VERSION + "\n" +
         "  SQLite  " + KTUNE_SQLITE_VERSION;
}

}  // namespace

CommandRegistration::CommandRegistration(const char* name, CommandAdder adder) {
  registry().emplace_back(name, adder);
}

}  // namespace ktune::tools

// CLI11's "The following arguments were not expected: c b a" lists them last first: the line a
// user reads instead, in the order typed, and (for NAME=VALUE words, tune's syntax given to a
// command that takes a workload key) what such a command wants.
namespace {
std::string extras_text(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return message + " (see --help)";
  std::istringstream words(message.substr(colon + 2));
  std::vector<std::string> extras;
  for (std::string w; words >> w;) extras.insert(extras.begin(), w);
  std::string text = "arguments not expected here:";
  bool assignment = false;
  for (const std::string& w : extras) {
    text += " " + w;
    assignment = assignment || (w.find('=') != std::string::npos && w.rfind("--", 0) != 0);
  }
  text += " (see --help";
  if (assignment)
    text +=
        "; a workload key is one quoted argument, e.g. "
        "'matmul(M=512,N=512,K=512,layout=nn,dtype=float32)'";
  return text + ")";
}
}  // namespace

int main(int argc, char** argv) {
  using namespace ktune;
  CLI::App app{"ktune: auto-tuning of tensor kernels (tiling, loop order, vectorization, ...)"};
  app.set_version_flag("--version", tools::version_text());
  app.require_subcommand(1);
  LoggingOptions logging;
  app.add_flag("-v,--verbose", logging.verbose, "Log debug messages");
  app.add_flag("-q,--quiet", logging.quiet, "Log warnings and errors only");
  app.parse_complete_callback([&] {
    setup_logging(logging);
    tools::use_kernel_cache_from_environment();
  });

  auto& commands = tools::registry();
  std::sort(commands.begin(), commands.end());
  for (const auto& [name, adder] : commands) adder(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end parsing with exit code 0: CLI11 prints them. A real parse error
    // is one line and status 1, like every other error (CLI11 would add a second line and exit
    // with its own codes).
    if (e.get_exit_code() == 0) return app.exit(e);
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "ktune: error: " << extras_text(e.what()) << "\n";
      return 1;
    }
    std::cerr << "ktune: error: " << e.what() << " (see --help)\n";
    return 1;
  } catch (const Error& e) {
    std::cerr << "ktune: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ktune: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
