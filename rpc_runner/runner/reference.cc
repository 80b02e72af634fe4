// The plain-schedule reference of a task.
#include "rpc_runner/runner/reference.h"

#include "te/lower.h"

namespace ktune::rpc_runner {

te::LoweredFunc lower_reference(const schedule_space::Task& task) {
  schedule_space::Instantiated inst = task.reference();
  return te::lower(inst.schedule, inst.args, task.template_name() + "_reference");
}

}  // namespace ktune::rpc_runner
