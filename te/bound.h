// Defines symbolic interval analysis used by bounds inference (compute_at regions).
#pragma once

#include <optional>
#include <unordered_map>
#include <utility>

#include "te/ir.h"
#include "te/simplify.h"

namespace ktune::te {

// Inclusive interval [lo, hi] whose ends are expressions of the variables that are not relaxed.
struct SymInterval {
  Expr lo, hi;
};

// The interval e spans when each variable in `relaxed` ranges over its constant range and every
// other variable is fixed; nullopt when the analysis cannot bound e (non-linear in a relaxed
// variable with unknown sign, a load, ...). `ranges` bounds the fixed variables (for signs).
std::optional<SymInterval> bound_symbolic(const Expr& e, const VarRanges& relaxed,
                                          const VarRanges& ranges);

}  // namespace ktune::te
