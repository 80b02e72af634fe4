#include "deploy/generated_schedule.h"

namespace ktune::deploy {

namespace {

// Whether root axis `d` of `st` is the loop directly inside `outer`, spatial and not innermost
// (the innermost loop is the one kernels vectorize).
bool next_leaf_is_axis(const te::Stage& st, const te::IterVar& outer, int d) {
  const auto& root = st.node().axes;
  if (d >= static_cast<int>(root.size())) return false;
  const std::vector<te::IterVar>& leaves = st.leaf_iter_vars();
  for (size_t k = 0; k + 2 < leaves.size(); ++k)
    if (leaves[k].var.same_as(outer.var))
      return leaves[k + 1].var.same_as(root[static_cast<size_t>(d)].var);
  return false;
}

}  // namespace

void parallel_leading(te::Stage st, int axes) {
  te::IterVar outer = st.axis(0);
  for (int d = 1; d < axes; ++d) outer = st.fuse(outer, st.axis(d));
  // A one-row tensor (a 1-D model's [N, C, 1, W] maps) takes its columns too, so that every thread
  // gets a share.
  for (int d = axes; outer.extent < kParallelSpread && next_leaf_is_axis(st, outer, d); ++d)
    outer = st.fuse(outer, st.axis(d));
  st.parallel(outer);
}

}  // namespace ktune::deploy
