// Lowering pass: the border tiles that skip_padding_taps leaves guarded are cut by tap into
// unguarded versions of the register tile.
//
// The outermost loop whose padding guards depend only on the enclosing loops and on unrolled loops
// inside it (in a border tile, the reduction loop below the window loops) becomes a chain of
// versions, one per interval of the register tile's copies that a tap reaches (see CutTiles):
// every version runs unguarded, so a border tile keeps no branch in its innermost loop and still
// multiplies only the valid taps. With a branch per copy there instead, conv2d_nchwc on a 14 x 14
// output (every tile a border tile) ran at 0.63x the speed of the same schedule without the pass.
#include <algorithm>
#include <cstdint>
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
using padding::DropConjuncts;
using padding::Guard;
using padding::NestScan;
using padding::slope_in;
using padding::some_point;
using padding::vars_of;
using padding::with_loop_range;

// Beyond this many versions of one border nest, code size wins: the other conjuncts stay guards.
constexpr int64_t kMaxVersions = 16;

// The unrolled loops inside a statement: variable -> (min, extent).
using TileRanges = std::unordered_map<const VarNode*, std::pair<int64_t, int64_t>>;

// Whether a statement holds a vectorized loop.
bool has_vectorized_loop(const Stmt& s) {
  class Find : public IRVisitor {
   public:
    bool found = false;

   protected:
    void visit(const For* op) override {
      found = found || op->for_kind == ForKind::kVectorized;
      IRVisitor::visit(op);
    }
  };
  Find f;
  f.visit_stmt(s);
  return f.found;
}

TileRanges unrolled_loops(const Stmt& s) {
  class Collect : public IRVisitor {
   public:
    TileRanges loops;

   protected:
    void visit(const For* op) override {
      const int64_t* m = as_const_int(op->min);
      const int64_t* x = as_const_int(op->extent);
      if (op->for_kind == ForKind::kUnrolled && m && x) loops[op->var.get()] = {*m, *x};
      IRVisitor::visit(op);
    }
  };
  Collect c;
  c.visit_stmt(s);
  return c.loops;
}

// Sets the range of the loop over `var`.
class SetRange : public IRMutator {
 public:
  SetRange(const VarNode* var, std::pair<int64_t, int64_t> range) : var_(var), range_(range) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    if (op->var.get() != var_) return IRMutator::visit(op, s);
    const DataType t = op->var.dtype();
    return For::make(op->var, make_const(t, static_cast<double>(range_.first)),
                     make_const(t, static_cast<double>(range_.second)), op->for_kind,
                     mutate(op->body));
  }

 private:
  const VarNode* var_;
  std::pair<int64_t, int64_t> range_;
};

// Cuts the register tiles of border nests by tap. Where every guard of a loop nest
// depends, besides the enclosing loops, only on unrolled loops inside it (the copies of a register
// tile: the nest is the innermost reduction loop of a border tile), the copies that a conjunct
// e >= 0 lets through are an interval of one unrolled loop u. The nest becomes the chain
//   if (e at the first copy >= 0) {every copy} else if (e at the second >= 0) {copies 1..}
//   ... else {nothing}
// (from the last copy when e falls with u), each version with u's range cut and the conjunct
// gone, so after unrolling every version runs unguarded: a border tile computes exactly its
// valid taps without a branch in the innermost loop. Versions that no enclosing value reaches are
// left out (a padding of p gives at most p + 1 per conjunct); a conjunct of the enclosing loops
// alone gives {the nest} or {nothing}.
class CutTiles : public IRMutator {
 public:
  explicit CutTiles(PaddingGuards& guards) : guards_(guards) {}
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    if (op->for_kind == ForKind::kSerial || op->for_kind == ForKind::kUnrolled) {
      if (std::optional<Stmt> cut = cut_nest(s)) return *cut;
    }
    return with_loop_range(outer_, op, [&] { return IRMutator::visit(op, s); });
  }

 private:
  // One conjunct to cut on: e >= 0, affine in the unrolled loop u with slope `slope` (u
  // undefined: e uses the enclosing loops only).
  struct Cut {
    std::string key;
    Expr e;
    Var u;
    int64_t slope = 0;
  };

  std::optional<Stmt> cut_nest(const Stmt& s) {
    NestScan scan(guards_);
    scan.visit_stmt(s);
    if (scan.found.empty() || !scan.initialized.empty() || scan.stores != scan.guarded_stores)
      return std::nullopt;
    // Only a register tile of vectors is cut. The versions of a tile of scalars, once unrolled,
    // are long straight-line chains of scalar loads, fmul and fadd sharing their loads, and
    // LLVM 19's SLP vectorizer (SLPVectorizerPass, at O3) combined such a chain wrongly: an
    // 8-wide tree with gathered operands gave wrong sums (NCHW conv2d, stride 2, dilation 2,
    // pad 2, a 3 x 1 tile; the block before SLP is right at O0). SLP leaves vector code alone.
    if (!has_vectorized_loop(s)) return std::nullopt;
    const TileRanges tile = unrolled_loops(s);
    // Conjuncts common to every guarding If, in the order of the first; none may use a loop of
    // the nest other than the tile's.
    std::vector<Expr> common;
    std::unordered_map<std::string, int> count;
    int branches = 0;
    for (const Guard& g : scan.found) {
      if (!g.branch) continue;
      ++branches;
      std::unordered_set<std::string> keys;
      for (const Expr& c : g.conjuncts) {
        for (const Var& v : vars_of(c))
          if (scan.bound.count(v.get()) && !tile.count(v.get())) return std::nullopt;
        const std::string key = structural_key(c);
        if (!keys.insert(key).second) continue;
        if (++count[key] == 1 && branches == 1) common.push_back(c);
      }
    }
    std::vector<Cut> cuts;
    int64_t versions = 1;
    for (const Expr& c : common) {
      const std::string key = structural_key(c);
      if (count[key] != branches) continue;
      const std::optional<Cut> cut = cut_of(c, key, tile);
      if (!cut) continue;
      const int64_t n = reached(*cut, tile).first.size();
      if (versions * n > kMaxVersions) continue;
      versions *= std::max<int64_t>(n, 1);
      cuts.push_back(*cut);
    }
    if (cuts.empty()) return std::nullopt;
    return build(s, cuts, 0, tile);
  }

  static std::optional<Cut> cut_of(const Expr& c, const std::string& key, const TileRanges& tile) {
    const std::optional<Expr> e = as_nonnegative(c);
    if (!e) return std::nullopt;
    Cut cut{key, *e, Var(), 0};
    for (const Var& v : vars_of(*e)) {
      if (!tile.count(v.get())) continue;
      if (cut.u.defined()) return std::nullopt;  // two loops of the tile
      cut.u = v;
    }
    if (!cut.u.defined()) return cut;
    const std::optional<int64_t> k = slope_in(*e, cut.u);
    if (!k || *k == 0) return std::nullopt;
    cut.slope = *k;
    return cut;
  }

  // (min, extent) of the cut's loop; one copy for a conjunct of the enclosing loops alone.
  static std::pair<int64_t, int64_t> range_of(const Cut& c, const TileRanges& tile) {
    return c.u.defined() ? tile.at(c.u.get()) : std::make_pair<int64_t, int64_t>(0, 1);
  }

  // The range of u in version k (the first k copies on the failing side left out).
  static std::pair<int64_t, int64_t> version_range(const Cut& c, std::pair<int64_t, int64_t> r,
                                                   int64_t k) {
    return c.slope > 0 ? std::make_pair(r.first + k, r.second - k)
                       : std::make_pair(r.first, r.second - k);
  }

  // The condition of version k: the conjunct at the first copy it keeps.
  static Expr condition(const Cut& c, std::pair<int64_t, int64_t> r, int64_t k) {
    if (!c.u.defined()) return simplify(GE::make(c.e, make_zero(c.e.dtype())));
    const int64_t at = c.slope > 0 ? r.first + k : r.first + r.second - 1 - k;
    const Expr e = substitute(c.e, {{c.u, make_const(c.u.dtype(), static_cast<double>(at))}});
    return simplify(GE::make(e, make_zero(c.e.dtype())));
  }

  // The versions some enclosing value reaches, and whether "nothing" is reached.
  std::pair<std::vector<int64_t>, bool> reached(const Cut& c, const TileRanges& tile) const {
    const std::pair<int64_t, int64_t> r = range_of(c, tile);
    std::vector<Var> vars;
    for (const Var& v : vars_of(c.e))
      if (!c.u.defined() || v.get() != c.u.get()) vars.push_back(v);
    auto value = [](const Expr& cond, const std::vector<std::pair<Var, Expr>>& at) {
      const Expr v = simplify(substitute(cond, at));
      const int64_t* i = as_const_int(v);
      return i ? std::optional<bool>(*i != 0) : std::nullopt;
    };
    std::vector<int64_t> ks;
    for (int64_t k = 0; k < r.second; ++k) {
      const Expr cond = condition(c, r, k);
      const Expr before = k > 0 ? condition(c, r, k - 1) : Expr();
      if (some_point(vars, outer_, [&](const std::vector<std::pair<Var, Expr>>& at) {
            return value(cond, at) != false && (!before.defined() || value(before, at) != true);
          }))
        ks.push_back(k);
    }
    const Expr last = condition(c, r, r.second - 1);
    const bool nothing = some_point(vars, outer_, [&](const std::vector<std::pair<Var, Expr>>& at) {
      return value(last, at) != true;
    });
    return {ks, nothing};
  }

  Stmt build(const Stmt& s, const std::vector<Cut>& cuts, size_t i, const TileRanges& tile) {
    if (i == cuts.size()) return s;
    const Cut& c = cuts[i];
    const auto [ks, nothing] = reached(c, tile);
    if (ks.empty()) return s;  // not expected: the nest never runs
    const std::pair<int64_t, int64_t> r = range_of(c, tile);
    const Stmt dropped = DropConjuncts(guards_, {c.key}).mutate(s);
    Stmt chain;  // undefined: nothing
    bool last = !nothing;
    for (auto k = ks.rbegin(); k != ks.rend(); ++k) {
      TileRanges cut_tile = tile;
      Stmt version = dropped;
      if (c.u.defined()) {
        cut_tile[c.u.get()] = version_range(c, r, *k);
        version = SetRange(c.u.get(), cut_tile[c.u.get()]).mutate(version);
      }
      version = build(version, cuts, i + 1, cut_tile);
      chain = last ? version : IfThenElse::make(condition(c, r, *k), version, chain);
      last = false;
    }
    return chain;
  }

  PaddingGuards& guards_;
  VarRanges outer_;
};

}  // namespace

Stmt cut_border_tiles(const Stmt& s, PaddingGuards& guards) {
  if (guards.conditions.empty()) return s;
  return CutTiles(guards).mutate(s);
}

}  // namespace ktune::te
