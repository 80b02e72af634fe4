// Declares `ktune db revalidate`, added to the `db` command by cmd_db.cc.
#pragma once

#include <CLI/CLI.hpp>

namespace ktune::tools {

// Adds `revalidate --db PATH [--top K] [--json]` to the `db` command.
void add_db_revalidate(CLI::App* db);

}  // namespace ktune::tools
