#include "deploy/generated_schedule.h"

namespace ktune::deploy {

void parallel_leading(te::Stage st, int axes) {
  te::IterVar outer = st.axis(0);
  for (int d = 1; d < axes; ++d) outer = st.fuse(outer, st.axis(d));
  st.parallel(outer);
}

}  // namespace ktune::deploy
