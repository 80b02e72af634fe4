// Lowering pass: a reduction whose operand is a bounds Select (the padding of a window, inlined)
// computes only the taps inside the bounds, and its interior tiles run without any guard.
//
// Why a lowering pass rather than region-split schedules in the templates: the padding is a
// property of the expression (the Select that an inlined pad stage leaves in the update), so one
// pass serves every template that inlines its padding (NCHWc conv and depthwise, NCHW conv, the
// pools) and any schedule of theirs: tiles, unrolled register tiles, fused parallel loops, tails.
//
// 1. Guard the taps. An update acc = acc + select(c, x, 0) * w (or max(acc, select(c, x, lowest)),
//    min likewise) is a no-op where c fails, so it becomes if (c) acc = acc + x * w: the taps of
//    the padding are skipped, not multiplied by zero (0 * w is taken as 0 even for w = inf: the
//    padding is not data). Conjuncts of c that depend on a vectorized loop's variable (NCHW
//    columns are lanes) stay a Select: a vector cannot skip some of its lanes.
// 2. Unswitch the guards once per accumulation: step 1's, and those tensorize leaves around an
//    intrinsic's update (if (c) dot, for an inlined zero padding), recorded alike. At the
//    outermost loop around an update that does not also hold that accumulator's initialization
//    (the loops of one reduction: the tile's reduction nest under compute_at, or the window loops
//    of one output pixel), the condition "every guard holds for every iteration of this nest" is,
//    per conjunct, affine in the loop variables: its minimum over the nest's constant ranges is a
//    test on the enclosing variables alone. The nest becomes if (test) { nest without those
//    guards } else { nest }. A conjunct that no enclosing value can satisfy for the whole nest (a
//    7-wide tile always touches both column borders) stays a guard in both copies.
// The guards left are handed on (PaddingGuards): cut_border_tiles removes those of border tiles.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "te/ir_visitor.h"
#include "te/lower_padding_guards.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

using padding::as_nonnegative;
using padding::conjunction;
using padding::conjuncts;
using padding::DropConjuncts;
using padding::Guard;
using padding::NestScan;
using padding::slope_in;
using padding::some_point;
using padding::vars_of;
using padding::with_loop_range;

bool is_const_float(const Expr& e, double v) {
  if (const FloatImm* f = e.as<FloatImm>()) return f->value == v;
  return is_const_int(e, static_cast<int64_t>(v)) && v == 0;
}

// Beyond these magnitudes a Select's false value never wins a max (min): the templates' "lowest".
constexpr double kNeverWins = 3.0e38;

bool never_wins(NodeKind combine, const Expr& v) {
  const FloatImm* f = v.as<FloatImm>();
  if (!f) return false;
  return combine == NodeKind::kMax ? f->value <= -kNeverWins : f->value >= kNeverWins;
}

// In an update operand `v` (combined into the accumulator by `combine`), the Select whose false
// value makes the whole update a no-op: v itself, or for a sum a factor of a product.
const Select* identity_select(NodeKind combine, const Expr& v) {
  if (const Select* s = v.as<Select>()) {
    if (combine == NodeKind::kAdd ? is_const_float(s->false_value, 0)
                                  : never_wins(combine, s->false_value))
      return s;
    return nullptr;
  }
  if (combine != NodeKind::kAdd) return nullptr;
  if (const Mul* m = v.as<Mul>()) {
    if (const Select* s = identity_select(combine, m->a)) return s;
    return identity_select(combine, m->b);
  }
  return nullptr;
}

// Replaces one Select node (by identity) by `with`.
class ReplaceSelect : public IRMutator {
 public:
  ReplaceSelect(const Select* target, Expr with) : target_(target), with_(std::move(with)) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Select* op, const Expr& e) override {
    return op == target_ ? with_ : IRMutator::visit(op, e);
  }

 private:
  const Select* target_;
  Expr with_;
};

// The accumulator read of an update `buffer[index] = combine(buffer[index], v)`: returns v and
// the combine kind, or nullopt.
std::optional<std::pair<NodeKind, Expr>> update_operand(const Store* st) {
  auto self = [&](const Expr& e) {
    const Load* l = e.as<Load>();
    return l && l->buffer.same_as(st->buffer) &&
           structural_key(l->index) == structural_key(st->index);
  };
  auto split = [&](const Expr& a, const Expr& b,
                   NodeKind k) -> std::optional<std::pair<NodeKind, Expr>> {
    if (self(a)) return std::make_pair(k, b);
    if (self(b)) return std::make_pair(k, a);
    return std::nullopt;
  };
  if (const Add* a = st->value.as<Add>()) return split(a->a, a->b, NodeKind::kAdd);
  if (const Max* a = st->value.as<Max>()) return split(a->a, a->b, NodeKind::kMax);
  if (const Min* a = st->value.as<Min>()) return split(a->a, a->b, NodeKind::kMin);
  return std::nullopt;
}

// Step 1: guards the taps; records the conditions it creates (If and lane Select conditions).
class GuardTaps : public IRMutator {
 public:
  explicit GuardTaps(PaddingGuards& guards) : guards_(guards) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    const bool vector = op->for_kind == ForKind::kVectorized;
    if (vector) lanes_.push_back(op->var);
    Stmt r = IRMutator::visit(op, s);
    if (vector) lanes_.pop_back();
    return r;
  }
  Stmt visit(const Store* op, const Stmt& s) override {
    std::vector<Expr> uniform;
    Expr value = op->value;
    for (;;) {
      const Stmt cur = Store::make(op->buffer, value, op->index);
      const auto upd = update_operand(cur.as<Store>());
      if (!upd || !value.dtype().is_float()) break;
      const Select* sel = identity_select(upd->first, upd->second);
      if (!sel) break;
      std::vector<Expr> all, lane, mine;
      conjuncts(sel->condition, &all);
      for (const Expr& c : all) (uses_lane(c) ? lane : mine).push_back(c);
      if (mine.empty()) break;
      Expr kept = sel->true_value;
      if (!lane.empty()) {
        const Expr lc = conjunction(lane);
        guards_.add(lc);
        kept = Select::make(lc, sel->true_value, sel->false_value);
      }
      value = ReplaceSelect(sel, kept).mutate(value);
      uniform.insert(uniform.end(), mine.begin(), mine.end());
    }
    if (uniform.empty()) return s;
    const Expr c = conjunction(uniform);
    guards_.add(c);
    return IfThenElse::make(c, Store::make(op->buffer, value, op->index));
  }

 private:
  bool uses_lane(const Expr& c) const {
    for (const Var& v : lanes_)
      if (uses_var(c, v)) return true;
    return false;
  }
  PaddingGuards& guards_;
  std::vector<Var> lanes_;
};

// The minimum of e over the ranges when e is affine in each ranged variable (constant
// coefficients), or nullopt.
std::optional<Expr> minimum(
    Expr e, const std::vector<std::pair<Var, std::pair<int64_t, int64_t>>>& ranges) {
  for (const auto& [v, r] : ranges) {
    if (!uses_var(e, v)) continue;
    const std::optional<int64_t> k = slope_in(e, v);
    if (!k) return std::nullopt;
    const int64_t at = *k >= 0 ? r.first : r.second;
    e = simplify(substitute(e, {{v, make_const(v.dtype(), static_cast<double>(at))}}));
  }
  return e;
}

// Step 2: unswitches each accumulation nest on its guards.
class Unswitch : public IRMutator {
 public:
  explicit Unswitch(PaddingGuards& guards) : guards_(guards) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    NestScan scan(guards_);
    scan.visit_stmt(s);
    if (scan.found.empty()) return s;
    // Conjuncts that hold for the whole nest everywhere, and those that need a test (lo >= 0).
    std::unordered_set<std::string> proven;
    std::vector<std::pair<std::string, Expr>> tests;
    std::unordered_set<std::string> seen;
    for (const Guard& g : scan.found) {
      if (scan.initialized.count(g.accumulator)) continue;  // not one accumulation yet: go inside
      for (const Expr& c : g.conjuncts) {
        const std::string key = structural_key(c);
        if (!seen.insert(key).second) continue;
        const std::optional<Expr> e = as_nonnegative(c);
        if (!e) continue;
        const std::optional<Expr> lo = minimum(*e, g.ranges);
        if (!lo || binds(scan.bound, *lo)) continue;
        const auto b = const_bound(*lo, outer_);
        if (b && b->second < 0) continue;  // fails for some iteration whatever the enclosing values
        if (b && b->first >= 0) {
          proven.insert(key);  // holds everywhere: no test needed
        } else {
          tests.emplace_back(key, *lo);
        }
      }
    }
    keep_satisfiable(&tests);
    std::vector<Expr> test;
    std::unordered_set<std::string> tested;
    for (const auto& [key, lo] : tests) {
      proven.insert(key);
      if (tested.insert(structural_key(lo)).second)
        test.push_back(GE::make(lo, make_zero(lo.dtype())));
    }
    if (proven.empty()) {
      return with_loop_range(outer_, op, [&] { return IRMutator::visit(op, s); });
    }
    Stmt interior = DropConjuncts(guards_, proven).mutate(s);
    return test.empty() ? interior : IfThenElse::make(conjunction(test), interior, s);
  }

 private:
  // Drops the tests of each group of enclosing variables (a row position, a column position)
  // that no value of those variables passes: a tile as wide as the output touches both column
  // borders, so its column guards stay while its row guards are still unswitched.
  void keep_satisfiable(std::vector<std::pair<std::string, Expr>>* tests) const {
    std::unordered_map<std::string, std::vector<size_t>> groups;
    std::unordered_map<std::string, std::vector<Var>> group_vars;
    for (size_t i = 0; i < tests->size(); ++i) {
      std::vector<Var> vs = vars_of((*tests)[i].second);
      std::string gk;
      for (const Var& v : vs) gk += std::to_string(reinterpret_cast<uintptr_t>(v.get())) + ",";
      groups[gk].push_back(i);
      group_vars[gk] = vs;
    }
    std::vector<bool> drop(tests->size(), false);
    for (const auto& [gk, members] : groups) {
      if (satisfiable(*tests, members, group_vars[gk])) continue;
      for (size_t i : members) drop[i] = true;
    }
    std::vector<std::pair<std::string, Expr>> kept;
    for (size_t i = 0; i < tests->size(); ++i)
      if (!drop[i]) kept.push_back((*tests)[i]);
    *tests = std::move(kept);
  }

  // Whether some value of `vars` (in their enclosing ranges) passes every test of `members`;
  // true when that is not known (a variable without a range, too many values).
  bool satisfiable(const std::vector<std::pair<std::string, Expr>>& tests,
                   const std::vector<size_t>& members, const std::vector<Var>& vars) const {
    return some_point(vars, outer_, [&](const std::vector<std::pair<Var, Expr>>& at) {
      for (size_t m : members) {
        const Expr value = simplify(substitute(tests[m].second, at));  // outlives v
        const int64_t* v = as_const_int(value);
        if (v && *v < 0) return false;
      }
      return true;
    });
  }

  static bool binds(const std::unordered_set<const VarNode*>& bound, const Expr& e) {
    for (const Var& v : vars_of(e))
      if (bound.count(v.get())) return true;
    return false;
  }
  PaddingGuards& guards_;
  VarRanges outer_;
};

}  // namespace

Stmt guard_padding_taps(const Stmt& s, PaddingGuards& guards) {
  return GuardTaps(guards).mutate(s);
}

Stmt unswitch_padding_guards(const Stmt& s, PaddingGuards& guards) {
  if (guards.conditions.empty()) return s;
  return Unswitch(guards).mutate(s);
}

}  // namespace ktune::te
