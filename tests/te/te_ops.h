// Defines the operator definitions (matmul, conv2d, pooling, softmax, ...) shared by te's tests.
#pragma once

#include <string>
#include <vector>

#include "te/tensor.h"

namespace ktune::te::testing {

// An operator: its placeholders, its outputs, and the kernel argument order.
struct OpDef {
  std::string name;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<Tensor> args() const {
    std::vector<Tensor> a = inputs;
    a.insert(a.end(), outputs.begin(), outputs.end());
    return a;
  }
};

inline OpDef matmul(int64_t m, int64_t n, int64_t k) {
  Tensor A = placeholder({m, k}, Float(32), "A");
  Tensor B = placeholder({k, n}, Float(32), "B");
  IterVar r = reduce_axis({0, k}, "k");
  Tensor C = compute(
      {m, n}, [&](Var i, Var j) { return sum(A(i, r) * B(r, j), r); }, "C");
  return {"matmul", {A, B}, {C}};
}

inline OpDef matmul_bias_relu(int64_t m, int64_t n, int64_t k) {
  Tensor A = placeholder({m, k}, Float(32), "A");
  Tensor B = placeholder({k, n}, Float(32), "B");
  Tensor bias = placeholder({n}, Float(32), "bias");
  IterVar r = reduce_axis({0, k}, "k");
  Tensor C = compute(
      {m, n}, [&](Var i, Var j) { return sum(A(i, r) * B(r, j), r); }, "C");
  Tensor D = compute(
      {m, n}, [&](Var i, Var j) { return C(i, j) + bias(j); }, "D");
  Tensor E = compute(
      {m, n}, [&](Var i, Var j) { return max(D(i, j), 0.0f); }, "E");
  return {"matmul_bias_relu", {A, B, bias}, {E}};
}

// NCHW input, KCRS weights, zero padding `pad`, stride `stride`.
inline OpDef conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                    int64_t stride, int64_t pad) {
  Tensor X = placeholder({n, c, h, w}, Float(32), "X");
  Tensor W = placeholder({k, c, r, s}, Float(32), "W");
  int64_t hp = h + 2 * pad, wp = w + 2 * pad;
  Tensor P = compute(
      {n, c, hp, wp},
      [&](Var b, Var ch, Var y, Var x) {
        Expr in = y >= pad && y < h + pad && x >= pad && x < w + pad;
        return select(in, X(b, ch, y - pad, x - pad), 0.0f);
      },
      "pad");
  int64_t ho = (hp - r) / stride + 1, wo = (wp - s) / stride + 1;
  IterVar rc = reduce_axis({0, c}, "rc"), ry = reduce_axis({0, r}, "ry"),
          rx = reduce_axis({0, s}, "rx");
  Tensor O = compute(
      {n, k, ho, wo},
      [&](Var b, Var f, Var y, Var x) {
        return sum(P(b, rc, y * stride + ry, x * stride + rx) * W(f, rc, ry, rx), {rc, ry, rx});
      },
      "conv");
  return {"conv2d", {X, W}, {O}};
}

inline OpDef depthwise_conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t pad) {
  Tensor X = placeholder({n, c, h, w}, Float(32), "X");
  Tensor W = placeholder({c, 1, r, r}, Float(32), "W");
  int64_t hp = h + 2 * pad, wp = w + 2 * pad;
  Tensor P = compute(
      {n, c, hp, wp},
      [&](Var b, Var ch, Var y, Var x) {
        Expr in = y >= pad && y < h + pad && x >= pad && x < w + pad;
        return select(in, X(b, ch, y - pad, x - pad), 0.0f);
      },
      "pad");
  IterVar ry = reduce_axis({0, r}, "ry"), rx = reduce_axis({0, r}, "rx");
  Tensor O = compute(
      {n, c, hp - r + 1, wp - r + 1},
      [&](Var b, Var ch, Var y, Var x) {
        return sum(P(b, ch, y + ry, x + rx) * W(ch, 0, ry, rx), {ry, rx});
      },
      "dwconv");
  return {"depthwise_conv2d", {X, W}, {O}};
}

inline OpDef max_pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kernel, int64_t stride) {
  Tensor X = placeholder({n, c, h, w}, Float(32), "X");
  IterVar ry = reduce_axis({0, kernel}, "ry"), rx = reduce_axis({0, kernel}, "rx");
  Tensor O = compute(
      {n, c, (h - kernel) / stride + 1, (w - kernel) / stride + 1},
      [&](Var b, Var ch, Var y, Var x) {
        return max(X(b, ch, y * stride + ry, x * stride + rx), {ry, rx});
      },
      "pool");
  return {"max_pool", {X}, {O}};
}

inline OpDef softmax(int64_t m, int64_t n) {
  Tensor X = placeholder({m, n}, Float(32), "X");
  IterVar k1 = reduce_axis({0, n}, "k1"), k2 = reduce_axis({0, n}, "k2");
  Tensor mx = compute(
      {m}, [&](Var i) { return max(X(i, k1), k1); }, "maxelem");
  Tensor e = compute(
      {m, n}, [&](Var i, Var j) { return exp(X(i, j) - mx(i)); }, "exp");
  Tensor s = compute(
      {m}, [&](Var i) { return sum(e(i, k2), k2); }, "expsum");
  Tensor o = compute(
      {m, n}, [&](Var i, Var j) { return e(i, j) / s(i); }, "softmax");
  return {"softmax", {X}, {o}};
}

}  // namespace ktune::te::testing
