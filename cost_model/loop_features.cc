// Loop-context features: walk the flat loop IR, find the main store, describe its loops and
// the buffers it touches.
#include "cost_model/loop_features.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "support/error.h"
#include "te/ir_visitor.h"
#include "te/lower.h"

namespace ktune::cost_model {
namespace {

float log2p(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

struct Loop {
  const te::VarNode* var;
  int64_t extent;
  te::ForKind kind;
};

struct Access {
  te::Buffer buffer;
  te::Expr index;
  bool write;
};

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Evaluates an integer index expression with the given variable values (others 0). Enough for
// strides: affine parts are exact, floor div/mod by constants are evaluated as written.
int64_t eval(const te::Expr& e, const std::unordered_map<const te::VarNode*, int64_t>& env) {
  using te::NodeKind;
  switch (e.kind()) {
    case NodeKind::kIntImm:
      return e.as<te::IntImm>()->value;
    case NodeKind::kVar: {
      auto it = env.find(static_cast<const te::VarNode*>(e.get()));
      return it == env.end() ? 0 : it->second;
    }
    case NodeKind::kAdd:
      return eval(e.as<te::Add>()->a, env) + eval(e.as<te::Add>()->b, env);
    case NodeKind::kSub:
      return eval(e.as<te::Sub>()->a, env) - eval(e.as<te::Sub>()->b, env);
    case NodeKind::kMul:
      return eval(e.as<te::Mul>()->a, env) * eval(e.as<te::Mul>()->b, env);
    case NodeKind::kDiv:
      return floor_div(eval(e.as<te::Div>()->a, env), eval(e.as<te::Div>()->b, env));
    case NodeKind::kMod: {
      int64_t a = eval(e.as<te::Mod>()->a, env), b = eval(e.as<te::Mod>()->b, env);
      return b == 0 ? 0 : a - floor_div(a, b) * b;
    }
    case NodeKind::kMin:
      return std::min(eval(e.as<te::Min>()->a, env), eval(e.as<te::Min>()->b, env));
    case NodeKind::kMax:
      return std::max(eval(e.as<te::Max>()->a, env), eval(e.as<te::Max>()->b, env));
    case NodeKind::kCast:
      return eval(e.as<te::Cast>()->value, env);
    case NodeKind::kRamp:
      return eval(e.as<te::Ramp>()->base, env);
    case NodeKind::kBroadcast:
      return eval(e.as<te::Broadcast>()->value, env);
    case NodeKind::kLet: {
      auto inner = env;
      const te::Let* l = e.as<te::Let>();
      inner[l->var.get()] = eval(l->value, env);
      return eval(l->body, inner);
    }
    case NodeKind::kSelect: {
      const te::Select* s = e.as<te::Select>();
      return eval(s->true_value, env);  // the in-bounds branch of a clamped/guarded index
    }
    default:
      return 0;  // loads, comparisons, floats: no contribution to the address
  }
}

// Collects the loads of an expression in order of appearance (not those inside indices).
class LoadCollector : public te::IRVisitor {
 public:
  std::vector<Access> loads;

 protected:
  using te::IRVisitor::visit;
  void visit(const te::Load* op) override { loads.push_back({op->buffer, op->index, false}); }
};

// Walks the statement, keeping the stack of enclosing loops.
class NestWalker : public te::IRVisitor {
 public:
  std::vector<Loop> stack;
  // The main store and its loops.
  double best_work = -1, best_count = 0;
  std::vector<Loop> main_loops;
  const te::Store* main_store = nullptr;
  // Global counts.
  double store_executions = 0;
  int stores = 0, loops = 0, max_depth = 0, parallel = 0, vectorized = 0, unrolled = 0;
  int allocates = 0, ifs = 0;
  double allocated_bytes = 0;

 protected:
  using te::IRVisitor::visit;
  void visit(const te::For* op) override {
    const int64_t* extent = te::as_const_int(op->extent);
    int64_t n = extent ? *extent : 1;
    ++loops;
    if (op->for_kind == te::ForKind::kParallel) ++parallel;
    if (op->for_kind == te::ForKind::kVectorized) ++vectorized;
    if (op->for_kind == te::ForKind::kUnrolled) ++unrolled;
    stack.push_back({op->var.get(), n, op->for_kind});
    max_depth = std::max(max_depth, static_cast<int>(stack.size()));
    te::IRVisitor::visit(op);
    stack.pop_back();
  }
  void visit(const te::Store* op) override {
    double count = 1;
    for (const Loop& l : stack) count *= static_cast<double>(l.extent);
    ++stores;
    store_executions += count;
    // Weighted by the loads it does, so the compute wins over a copy run as often.
    LoadCollector loads;
    loads.visit_expr(op->value);
    double work = count * static_cast<double>(1 + loads.loads.size());
    if (work > best_work) {
      best_work = work;
      best_count = count;
      main_loops = stack;
      main_store = op;
    }
    te::IRVisitor::visit(op);
  }
  void visit(const te::Allocate* op) override {
    ++allocates;
    const int64_t* extent = te::as_const_int(op->extent);
    if (extent) allocated_bytes += static_cast<double>(*extent) * op->buffer.dtype().bytes();
    te::IRVisitor::visit(op);
  }
  void visit(const te::IfThenElse* op) override {
    ++ifs;
    te::IRVisitor::visit(op);
  }
};

// Distinct elements an access touches over the innermost `levels` loops of `loops`:
// min(product of extents of the loops it moves along, its address span).
double footprint(const std::vector<int64_t>& strides, const std::vector<Loop>& loops,
                 size_t levels) {
  double product = 1, span = 1;
  size_t n = loops.size();
  for (size_t k = 0; k < std::min(levels, n); ++k) {
    size_t j = n - 1 - k;
    if (strides[j] == 0) continue;
    product *= static_cast<double>(loops[j].extent);
    span += static_cast<double>(std::llabs(strides[j])) * static_cast<double>(loops[j].extent - 1);
  }
  return std::min(product, span);
}

}  // namespace

std::vector<float> failed_loop_context_features() {
  std::vector<float> f(kLoopContextLength, 0.0f);
  f[0] = 1.0f;
  return f;
}

std::vector<float> loop_context_features(const te::Stmt& body) {
  std::vector<float> f(kLoopContextLength, 0.0f);
  NestWalker walker;
  walker.visit_stmt(body);
  const std::vector<Loop>& loops = walker.main_loops;

  double unrolled_product = 1;
  int64_t vector_lanes = 0;
  for (const Loop& l : loops) {
    if (l.kind == te::ForKind::kUnrolled) unrolled_product *= static_cast<double>(l.extent);
    if (l.kind == te::ForKind::kVectorized) vector_lanes = l.extent;
  }
  f[1] = log2p(walker.store_executions);
  f[2] = log2p(walker.stores);
  f[3] = static_cast<float>(walker.loops);
  f[4] = static_cast<float>(walker.max_depth);
  f[5] = static_cast<float>(walker.parallel);
  f[6] = static_cast<float>(walker.vectorized);
  f[7] = static_cast<float>(walker.unrolled);
  f[8] = log2p(unrolled_product > 1 ? unrolled_product : 0);
  f[9] = log2p(static_cast<double>(vector_lanes));
  f[10] = static_cast<float>(walker.allocates);
  f[11] = log2p(walker.allocated_bytes);
  f[12] = static_cast<float>(walker.ifs);

  // Loop slots, innermost first.
  size_t n = loops.size();
  std::vector<double> above(n + 1, 1.0), below(n + 1, 1.0);  // products outside / inside level j
  for (size_t j = 0; j < n; ++j) above[j + 1] = above[j] * static_cast<double>(loops[j].extent);
  for (size_t j = n; j-- > 0;) below[j] = below[j + 1] * static_cast<double>(loops[j].extent);
  for (size_t k = 0; k < std::min(n, kLoopSlots); ++k) {
    size_t j = n - 1 - k;
    float* slot = &f[kGlobalFeatures + k * kPerLoop];
    slot[0] = log2p(static_cast<double>(loops[j].extent));
    slot[1] = static_cast<float>(j + 1);
    slot[2] = log2p(above[j]);
    slot[3] = log2p(below[j + 1]);
    slot[4 + static_cast<int>(loops[j].kind)] = 1.0f;
  }
  static_assert(static_cast<int>(te::ForKind::kSerial) == 0 &&
                static_cast<int>(te::ForKind::kParallel) == 1 &&
                static_cast<int>(te::ForKind::kVectorized) == 2 &&
                static_cast<int>(te::ForKind::kUnrolled) == 3);

  // Buffer slots: the stored buffer, then the loaded ones.
  if (walker.main_store != nullptr) {
    std::vector<Access> accesses = {{walker.main_store->buffer, walker.main_store->index, true}};
    LoadCollector loads;
    loads.visit_expr(walker.main_store->value);
    accesses.insert(accesses.end(), loads.loads.begin(), loads.loads.end());
    std::vector<const te::BufferNode*> seen;
    size_t slot_index = 0;
    double executions = std::max(1.0, walker.best_count);
    for (const Access& a : accesses) {
      if (slot_index == kBufferSlots) break;
      if (std::find(seen.begin(), seen.end(), a.buffer.get()) != seen.end()) continue;
      seen.push_back(a.buffer.get());
      std::unordered_map<const te::VarNode*, int64_t> env;
      int64_t base = eval(a.index, env);
      std::vector<int64_t> strides(n);
      for (size_t j = 0; j < n; ++j) {
        env[loops[j].var] = 1;
        strides[j] = eval(a.index, env) - base;
        env.erase(loops[j].var);
      }
      double bytes = a.buffer.dtype().bytes();
      float* slot = &f[kGlobalFeatures + kLoopSlots * kPerLoop + slot_index * kPerBuffer];
      int64_t inner_stride = n > 0 ? std::llabs(strides[n - 1]) : 0;
      slot[0] = 1.0f;
      slot[1] = a.write ? 1.0f : 0.0f;
      slot[2] = log2p(static_cast<double>(inner_stride));
      slot[3] = inner_stride == 1 ? 1.0f : 0.0f;
      slot[4] = log2p(footprint(strides, loops, 1) * bytes);
      slot[5] = log2p(footprint(strides, loops, 2) * bytes);
      slot[6] = log2p(footprint(strides, loops, 4) * bytes);
      double whole = footprint(strides, loops, n);
      slot[7] = log2p(whole * bytes);
      slot[8] = log2p(executions / whole);
      ++slot_index;
    }
  }
  return f;
}

std::vector<float> config_loop_features(const schedule_space::Task& task,
                                        const schedule_space::Config& config) {
  te::Stmt captured;
  try {
    schedule_space::Instantiated inst = task.instantiate(config);
    te::LowerOptions options;
    options.unroll = false;  // the IR is captured before these passes; skip their work
    options.vectorize = false;
    options.on_pass = [&captured](const std::string& pass, const te::Stmt& s) {
      if (pass == "clamp_select_loads") captured = s;
    };
    te::lower(inst.schedule, inst.args, "features", options);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInstantiation || e.kind() == ErrorKind::kInvalidSchedule) {
      return failed_loop_context_features();
    }
    throw;
  }
  if (!captured.defined()) {
    throw Error(ErrorKind::kInternal, "features: lowering has no clamp_select_loads pass");
  }
  return loop_context_features(captured);
}

LoopFeatureExtractor::LoopFeatureExtractor(schedule_space::Task task, LoopFeatureParams params)
    : task_(std::move(task)),
      cache_(
          kLoopContextLength + task_.space().knob_feature_length(),
          [this](uint64_t index) {
            const schedule_space::ConfigSpace& space = task_.space();
            std::vector<float> row = config_loop_features(task_, space.get(index));
            std::vector<float> knobs = space.knob_features(index);
            row.insert(row.end(), knobs.begin(), knobs.end());
            return row;
          },
          params.cache) {}

}  // namespace ktune::cost_model
