// Declares the registration function of each `ktune` subcommand (one cmd_*.cc file each).
#pragma once

#include <CLI/CLI.hpp>

namespace ktune::tools {

// Each adds its subcommand to `app`; the callback runs the command and throws ktune::Error on
// failure (ktune.cc turns that into one line on stderr and exit status 1).
// A subcommand file defines its function and registers it with KTUNE_REGISTER_COMMAND.
using CommandAdder = void (*)(CLI::App& app);

// Registry filled by static registration in the cmd_*.cc files.
struct CommandRegistration {
  CommandRegistration(const char* name, CommandAdder adder);
};

#define KTUNE_REGISTER_COMMAND(name, adder) \
  static ::ktune::tools::CommandRegistration ktune_command_registration_##name(#name, adder)

}  // namespace ktune::tools
