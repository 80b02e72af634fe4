// Defines lower_reference: a task's compute under a plain (untiled) schedule, the correctness
// oracle.
#pragma once

#include "schedule_space/task.h"
#include "te/ir.h"

namespace ktune::rpc_runner {

// Returns Task::reference() (the compute under a plain schedule, same arguments as every
// config) lowered as "<template>_reference". Throws Error from the template or from lower().
te::LoweredFunc lower_reference(const schedule_space::Task& task);

}  // namespace ktune::rpc_runner
