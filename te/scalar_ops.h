// Defines the scalar semantics of te's operations, shared by the interpreter and the evaluator.
#pragma once

#include <cstdint>

#include "te/ir.h"

namespace ktune::te {

// One lane of a value: ints (all widths, bools) as int64, floats as double (float32 and bfloat16
// values are kept rounded to their type after every operation).
union Scalar {
  int64_t i;
  double f;
};

// a op b for a binary node kind, with t the operand type (element). Comparisons, And and Or
// return 0/1 in .i. Throws ktune::Error(kRun) on integer division by zero.
Scalar scalar_binary(NodeKind op, DataType t, Scalar a, Scalar b);
// value converted from type `from` to `to` (C semantics, see Cast in ir.h).
Scalar scalar_cast(DataType to, DataType from, Scalar v);
// A math intrinsic on t (b is used by pow only).
Scalar scalar_call(CallOp op, DataType t, Scalar a, Scalar b);
// Rounds/wraps a freshly computed value to type t (float32 or bfloat16 rounding, integer
// wrap-around).
Scalar scalar_normalize(DataType t, Scalar v);
// Element i of a raw buffer of element type t, and the store of one.
Scalar scalar_load(const void* base, DataType t, int64_t i);
void scalar_store(void* base, DataType t, int64_t i, Scalar v);

}  // namespace ktune::te
