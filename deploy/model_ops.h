// Declares the generated kernels of a model build: layout conversions between NCHW and the channel-blocked NCHWc, copies, and elementwise operators, each a te compute with a plain parallel schedule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "te/ir.h"

namespace ktune::deploy {

// An elementwise operation of one or two operands of the same shape and layout.
struct ElementwiseOp {
  std::string op;          // relu, clip, sigmoid, hardswish, silu, add, mul, copy
  float min = 0, max = 0;  // clip's bounds
  int operands() const { return op == "add" || op == "mul" ? 2 : 1; }
};

// True when elementwise() implements `op`.
bool is_elementwise(const std::string& op);

// NCHW [n, c, h, w] -> NCHWc [n, ceil(c/block), h, w, block], the lanes past c zero.
te::LoweredFunc to_blocked(const std::string& name, const std::vector<int64_t>& nchw, int64_t block);
// NCHWc [n, ceil(c/block), h, w, block] -> NCHW [n, c, h, w].
te::LoweredFunc from_blocked(const std::string& name, const std::vector<int64_t>& nchw, int64_t block);
// `count` elements of each operand -> `count` elements. Throws Error(kUnsupported) for an
// operation is_elementwise does not know.
te::LoweredFunc elementwise(const std::string& name, const ElementwiseOp& op, int64_t count);

}  // namespace ktune::deploy
