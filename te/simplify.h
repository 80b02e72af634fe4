// Defines the arithmetic simplifier: linear canonical forms, constant bounds and proofs over
// ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "te/ir.h"

namespace ktune::te {

// Inclusive integer ranges [lo, hi] of variables, keyed by node.
using VarRanges = std::unordered_map<const VarNode*, std::pair<int64_t, int64_t>>;

// An equivalent expression: constants folded, Int(64) arithmetic put in a canonical linear form
// (terms in first-use order, then the constant), floor div/mod, min/max and comparisons decided
// where the ranges allow. Never throws for well-typed input.
Expr simplify(const Expr& e, const VarRanges& ranges = {});

// The simplify pass over a statement: expressions simplified under the ranges of the enclosing
// constant-bound loops, guards that are always true/false removed, loops of extent 1 replaced by
// their body, loops of extent 0 removed.
Stmt simplify(const Stmt& s);

// Inclusive constant bounds of an integer expression under ranges, or nullopt when unknown
// (a free variable without a range, a load, ...).
std::optional<std::pair<int64_t, int64_t>> const_bound(const Expr& e, const VarRanges& ranges);

// True when the Bool expression holds for every value in ranges (false means "not proven").
bool can_prove(const Expr& cond, const VarRanges& ranges);

// Floor division and modulo on int64 (b != 0): what te's integer Div/Mod compute.
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

// A key equal for structurally equal expressions (variables compared by identity).
std::string structural_key(const Expr& e);

}  // namespace ktune::te
