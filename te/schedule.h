// Defines Schedule and Stage: how each tensor of a computation is iterated, placed and stored.
//
// A Schedule is a handle: copies share one state (like TVM's). Not thread-safe to mutate; lowering
// only reads it, so several threads may lower (distinct or the same) schedules at once.
// Every misuse throws ktune::Error(kInvalidSchedule) with the stage and axis names in the message.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "te/ir.h"
#include "te/tensor.h"
#include "te/tensor_intrin.h"

namespace ktune::te {

// parent -> (outer, inner). Exactly one of factor / nparts is positive.
struct SplitRelation {
  IterVar parent, outer, inner;
  int64_t factor = 0;
  int64_t nparts = 0;
};
// (outer, inner) -> fused, fused = outer * extent(inner) + inner.
struct FuseRelation {
  IterVar outer, inner, fused;
};
struct IterRelation {
  bool is_split = true;
  SplitRelation split;
  FuseRelation fuse;
};

enum class AttachKind : uint8_t { kRoot, kInline, kAt };

// The schedule state of one tensor. `body` and `reduce_axes` are the stage's own definition: equal
// to the tensor's at creation, rewritten by cache_read/cache_write.
struct StageNode {
  std::string name;
  Tensor tensor;  // what this stage produces (the output identity; kernel args refer to it)
  bool is_placeholder = false;
  bool is_output = false;
  std::vector<IterVar> axes;         // spatial root axes, one per dimension
  std::vector<IterVar> reduce_axes;  // from the body's Reduce
  Expr body;
  std::vector<IterRelation> relations;
  std::vector<IterVar> leaves;                            // loop order, outermost first
  std::unordered_map<const VarNode*, ForKind> for_kinds;  // leaf annotations
  // Leaves whose loop nest an intrinsic replaces (the tensorize pass).
  std::unordered_map<const VarNode*, std::shared_ptr<const TensorIntrin>> tensorized;
  AttachKind attach = AttachKind::kRoot;
  int attach_stage = -1;  // index in ScheduleNode::stages when attach == kAt
  IterVar attach_ivar;
};

struct ScheduleNode {
  std::vector<StageNode> stages;  // producers before consumers
  std::vector<Tensor> outputs;
  // The lowering skips the taps of an inlined padding (the skip_padding_taps pass): a schedule
  // asks for it, so that a schedule that does not ask lowers as it always did.
  bool skip_padding_taps = false;
  // The stage index of a tensor (by node), or -1.
  int find(const TensorNode* t) const;
};

class Schedule;

// A handle to one stage of a schedule, by the tensor it produces: it stays valid when
// cache_read/cache_write insert stages.
class Stage {
 public:
  Stage(std::shared_ptr<ScheduleNode> s, const TensorNode* tensor)
      : sched_(std::move(s)), tensor_(tensor) {}

  const StageNode& node() const { return sched_->stages[index()]; }
  // The stage's current position in ScheduleNode::stages.
  int index() const { return sched_->find(tensor_); }
  const std::string& name() const { return node().name; }
  // Spatial root axis d (throws for a bad d).
  IterVar axis(int d) const;
  // Reduction axis d of the stage's own body.
  IterVar reduce_axis(int d) const;
  const std::vector<IterVar>& leaf_iter_vars() const { return node().leaves; }

  // Splits a leaf by an inner extent `factor` (>= 1); the outer loop has ceil(extent/factor)
  // iterations and non-dividing extents get a guard. Returns (outer, inner).
  std::pair<IterVar, IterVar> split(const IterVar& parent, int64_t factor);
  // Splits a leaf into `nparts` outer iterations (inner = ceil(extent/nparts)).
  std::pair<IterVar, IterVar> split_nparts(const IterVar& parent, int64_t nparts);
  // split x by fx and y by fy, then order (xo, yo, xi, yi). Returns that tuple.
  std::tuple<IterVar, IterVar, IterVar, IterVar> tile(const IterVar& x, const IterVar& y,
                                                      int64_t fx, int64_t fy);
  // Fuses two leaves adjacent in the loop order (outer directly enclosing inner).
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  // Puts the given leaves in this order, in the positions they occupy now.
  void reorder(const std::vector<IterVar>& order);
  // Loop annotations. vectorize: a spatial leaf that must be innermost at lowering.
  void vectorize(const IterVar& leaf);
  void unroll(const IterVar& leaf);
  // parallel: a spatial leaf.
  void parallel(const IterVar& leaf);
  // Replaces the loop nest of `leaf` (it and the loops inside it) by `intrin` (a reduction
  // stage's leaf). Whether the nest computes what the intrinsic does (extents, strides, dtypes)
  // is checked by lower(), which throws kInvalidSchedule saying what differs.
  void tensorize(const IterVar& leaf, const TensorIntrin& intrin);
  // Computes this stage inside loop `leaf` of `parent`: only the region that the consumers read
  // in one iteration of that loop is computed there, into a local buffer of that (constant) size.
  // `parent` must use this stage, directly or through other stages; every consumer must run inside
  // that loop (be `parent`, or be attached into `parent` at `leaf` or deeper, maybe through other
  // attached stages) — the latter is checked by lower(), when all attachments are known.
  void compute_at(const Stage& parent, const IterVar& leaf);
  // Substitutes this stage's body into its consumers (not for reductions or outputs).
  void compute_inline();
  void compute_root();

 private:
  StageNode& mut() { return sched_->stages[index()]; }
  int leaf_pos(const IterVar& iv, const char* what) const;
  std::shared_ptr<ScheduleNode> sched_;
  const TensorNode* tensor_;
};

class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(std::shared_ptr<ScheduleNode> n) : node_(std::move(n)) {}
  // The stage of t (throws kInvalidSchedule if t is not part of this schedule).
  Stage operator[](const Tensor& t) const;
  const ScheduleNode& node() const { return *node_; }
  // Asks the lowering to skip the taps of inlined paddings (ScheduleNode::skip_padding_taps).
  void skip_padding_taps(bool on) { node_->skip_padding_taps = on; }
  const std::vector<Tensor>& outputs() const { return node_->outputs; }

  // Makes t's stage compute into a new local tensor "<t>.<suffix>" (returned) and copy that into
  // t. Must precede any split/fuse/reorder of t's stage. The new stage owns t's reduction.
  Tensor cache_write(const Tensor& t, const std::string& suffix = "local");
  // A new stage "<t>.<suffix>" copying t, read by `readers` instead of t. Returns it.
  Tensor cache_read(const Tensor& t, const std::vector<Tensor>& readers,
                    const std::string& suffix = "shared");

 private:
  void insert_stage(int pos, StageNode stage);
  std::shared_ptr<ScheduleNode> node_;
};

// A schedule with every tensor that `outputs` depend on as a root stage, in the default order.
// Throws ktune::Error(kInvalidArgument) when outputs is empty.
Schedule create_schedule(const std::vector<Tensor>& outputs);

}  // namespace ktune::te
