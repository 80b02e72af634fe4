// ktune's parallel runtime as C++ sees it: the thread count of ktune_parallel_for's pool.
//
// The pool itself is codegen/parallel_runtime.c, plain C11 and pthreads, so that the runtime a
// tuning run times kernels on is the very file `ktune build --runtime` ships with them.
#include "codegen/runtime.h"

#include <string>

#include "support/error.h"

namespace ktune::codegen {

void set_num_threads(int n) {
  if (n < 1)
    throw Error(ErrorKind::kInvalidArgument, "thread count must be >= 1, got " + std::to_string(n));
  ktune_set_num_threads(n);
}

int num_threads() { return ktune_get_num_threads(); }

}  // namespace ktune::codegen
