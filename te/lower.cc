// Implements lower(): the lowering pipeline, one pass per file, in order.
#include "te/lower.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower_padding_guards.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

// Marks every unrolled/vectorized loop serial (when those passes are turned off).
class Serialize : public IRMutator {
 public:
  explicit Serialize(ForKind k) : k_(k) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt b = IRMutator::visit(op, s);
    const For* f = b.as<For>();
    return f->for_kind == k_ ? For::make(f->var, f->min, f->extent, ForKind::kSerial, f->body) : b;
  }

 private:
  ForKind k_;
};

}  // namespace

LoweredFunc lower(const Schedule& sched, const std::vector<Tensor>& args, const std::string& name,
                  const LowerOptions& options) {
  LoweredFunc f;
  f.name = name;
  auto after = [&](const char* pass, const Stmt& s) {
    if (options.dump_after_each_pass)
      spdlog::info("te: IR of {} after {}:\n{}", name, pass, to_string(s));
    if (options.on_pass) options.on_pass(pass, s);
  };
  Stmt s = schedule_ops(sched, args, &f.args);
  after("schedule_ops", s);
  s = storage_flatten(s, f.args);
  after("storage_flatten", s);
  s = simplify(s);
  after("simplify", s);
  // The guards that skip the taps of inlined paddings: tensorize's around an intrinsic, and
  // skip_padding_taps' around a scalar or vector update. One unswitch and one cut serve both.
  PaddingGuards guards;
  const auto& stages = sched.node().stages;
  if (std::any_of(stages.begin(), stages.end(),
                  [](const StageNode& st) { return !st.tensorized.empty(); })) {
    s = tensorize(s, sched, guards);
    after("tensorize", s);
  }
  const bool skip_taps = options.skip_padding_taps && sched.node().skip_padding_taps;
  if (skip_taps) s = guard_padding_taps(s, guards);
  if (skip_taps || !guards.conditions.empty()) {
    s = unswitch_padding_guards(s, guards);
    after("skip_padding_taps", s);
    s = simplify(cut_border_tiles(s, guards));
    after("cut_border_tiles", s);
  }
  s = clamp_select_loads(s, f.args);
  after("clamp_select_loads", s);
  if (options.partition_loops) {
    s = simplify(partition_loops(s));
    after("partition_loops", s);
  }
  if (options.unroll) {
    s = simplify(unroll_loops(s));
  } else {
    Serialize ser(ForKind::kUnrolled);
    s = ser.mutate(s);
  }
  after("unroll_loops", s);
  if (options.vectorize) {
    s = simplify(vectorize_loops(s));
  } else {
    Serialize ser(ForKind::kVectorized);
    s = ser.mutate(s);
  }
  after("vectorize_loops", s);
  s = remove_no_ops(s);
  after("remove_no_ops", s);
  f.body = s;
  return f;
}

}  // namespace ktune::te
