// place_in_arena(): the memory plan of a model's intermediate tensors.
#include <algorithm>
#include <map>
#include <vector>

#include "deploy/model_plan.h"

namespace ktune::deploy {
namespace {

constexpr int64_t kAlign = 64;

int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

// Liveness-based placement: each arena tensor lives from the step that writes it to the last
// step that reads it or a view of it (a Concat's operand written in place is a view, so its
// buffer lives from the first operand's producer); larger tensors are placed first, each at the
// lowest offset that no tensor live at the same time overlaps.
void place_in_arena(ModelPlan& plan) {
  const auto root = [&](int64_t id) {
    return plan.tensors[id].alias_of >= 0 ? plan.tensors[id].alias_of : id;
  };
  std::map<int64_t, std::pair<size_t, size_t>> live;  // root id -> [first, last] step
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (int64_t id : plan.steps[i].args) {
      const int64_t r = root(id);
      if (plan.tensors[r].storage != Storage::kArena) continue;
      auto [it, fresh] = live.emplace(r, std::make_pair(i, i));
      if (!fresh) it->second.second = i;
    }
  std::vector<int64_t> order;
  for (const auto& [id, span] : live) order.push_back(id);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return plan.tensors[a].bytes() > plan.tensors[b].bytes();
  });
  std::vector<int64_t> placed;
  for (int64_t id : order) {
    const auto [first, last] = live[id];
    const int64_t size = align_up(plan.tensors[id].bytes());
    plan.tensor_bytes_total += size;
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int64_t p : placed) {
      const auto [pf, pl] = live[p];
      if (pf <= last && first <= pl)
        busy.push_back(
            {plan.tensors[p].offset, plan.tensors[p].offset + align_up(plan.tensors[p].bytes())});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    plan.tensors[id].offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(id);
  }
  for (PlanTensor& t : plan.tensors)
    if (t.alias_of >= 0) t.offset = plan.tensors[t.alias_of].offset + t.view_offset;
}

}  // namespace ktune::deploy
