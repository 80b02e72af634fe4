// Tests te's tensorize: a blocked int8 matmul tensorized with dot_16x4_u8s8s32 computes what its
// plain schedule computes (te's interpreter, bit-exact), and a nest that differs from the
// intrinsic (extent, stride, dtype, a guard, a loop split away) fails lowering saying so.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "support/error.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor_intrin.h"

namespace ktune::te {
namespace {

// acc[M][NB][16] = sum over K = 4 KB of A[i][k] * B[jb][kb][jl][kl] (k = 4 kb + kl), with the
// operand types and B's block order as given.
struct Blocked {
  Tensor a, b, acc;
};

Blocked blocked(int64_t M, int64_t NB, int64_t KB, DataType a_type = UInt(8),
                bool b_k_major = false) {
  Blocked t;
  t.a = placeholder({M, KB * 4}, a_type, "A");
  t.b = placeholder(
      b_k_major ? std::vector<int64_t>{NB, KB, 4, 16} : std::vector<int64_t>{NB, KB, 16, 4}, Int(8),
      "B");
  const IterVar kb = reduce_axis({0, KB}, "kb"), kl = reduce_axis({0, 4}, "kl");
  const Tensor a = t.a, b = t.b;
  t.acc = compute(
      {M, NB, 16},
      [&](Var i, Var jb, Var jl) {
        Expr bv = b_k_major ? b(jb, kb, kl, jl) : b(jb, kb, jl, kl);
        return sum(cast(Int(32), a(i, kb.var * Expr(4) + kl.var)) * cast(Int(32), bv), {kb, kl});
      },
      "acc");
  return t;
}

// The register-tile schedule: kb outermost, rows and blocks unrolled, (jl, kl) innermost.
Schedule tiled(const Blocked& t) {
  Schedule s = create_schedule({t.acc});
  Stage st = s[t.acc];
  st.reorder({st.reduce_axis(0), st.axis(0), st.axis(1), st.axis(2), st.reduce_axis(1)});
  st.unroll(st.axis(1));
  return s;
}

std::vector<HostBuffer> run(const LoweredFunc& f, const Blocked& t) {
  std::vector<HostBuffer> bufs;
  bufs.emplace_back(t.a.shape(), t.a.dtype());
  bufs.emplace_back(t.b.shape(), t.b.dtype());
  bufs.emplace_back(t.acc.shape(), Int(32));
  bufs[0].fill_random(3, 0, 255);
  bufs[1].fill_random(4, -128, 127);
  std::memset(bufs[2].data(), 0x5A, bufs[2].bytes());  // a sentinel no sum here reaches
  std::vector<HostBuffer*> ptrs = {&bufs[0], &bufs[1], &bufs[2]};
  interpret(f, ptrs);
  return bufs;
}

TEST(TensorizeTest, MatchesThePlainSchedule) {
  const Blocked t = blocked(3, 2, 5);
  Schedule s = tiled(t);
  s[t.acc].tensorize(s[t.acc].axis(2), dot_16x4_u8s8s32());
  const LoweredFunc f = lower(s, {t.a, t.b, t.acc}, "dot");
  const std::string ir = to_string(f);
  EXPECT_NE(ir.find("dot_u8s8("), std::string::npos) << ir;
  const LoweredFunc plain = lower(create_schedule({t.acc}), {t.a, t.b, t.acc}, "plain");
  const auto got = run(f, t), want = run(plain, t);
  ASSERT_EQ(std::memcmp(got[2].data(), want[2].data(), want[2].bytes()), 0);
  // The sums use the whole byte range: some exceed what int16 holds.
  int64_t big = 0;
  for (int64_t i = 0; i < want[2].num_elements(); ++i)
    big += std::abs(want[2].as<int32_t>()[i]) > 32767;
  EXPECT_GT(big, 0);
}

// Lowering `s` fails with kInvalidSchedule and a message holding every one of `parts`.
void expect_refused(const Schedule& s, const Blocked& t, const std::vector<std::string>& parts) {
  try {
    lower(s, {t.a, t.b, t.acc}, "bad");
    ADD_FAILURE() << "lowered";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidSchedule) << e.what();
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nmissing: " << p;
  }
}

TEST(TensorizeTest, RefusesAnotherExtent) {
  const Blocked t = blocked(2, 1, 2);
  Schedule s = tiled(t);
  Stage st = s[t.acc];
  auto [o, in] = st.split(st.axis(2), 8);
  st.tensorize(in, dot_16x4_u8s8s32());
  expect_refused(s, t, {"tensorize dot_16x4_u8s8s32", "has extent 8", "axis c.i has 16"});
}

TEST(TensorizeTest, RefusesAnotherStride) {
  const Blocked t = blocked(2, 1, 2, UInt(8), true);
  Schedule s = tiled(t);
  s[t.acc].tensorize(s[t.acc].axis(2), dot_16x4_u8s8s32());
  expect_refused(s, t,
                 {"B's index steps by 1 over loop", "the intrinsic's b by 4 over its axis c.i"});
}

TEST(TensorizeTest, RefusesAnotherDtype) {
  const Blocked t = blocked(2, 1, 2, Int(8));
  Schedule s = tiled(t);
  s[t.acc].tensorize(s[t.acc].axis(2), dot_16x4_u8s8s32());
  expect_refused(s, t, {"reads A as int8", "the intrinsic's a is uint8"});
}

TEST(TensorizeTest, RefusesAnotherLoopOrder) {
  const Blocked t = blocked(2, 1, 2);
  Schedule s = tiled(t);
  Stage st = s[t.acc];
  auto [ko, ki] = st.split(st.reduce_axis(1), 2);
  st.reorder({st.axis(2), ko, ki});
  st.tensorize(st.axis(2), dot_16x4_u8s8s32());
  expect_refused(s, t, {"loop kl.o has extent 2", "axis k has 4"});
}

TEST(TensorizeTest, RefusesAGuard) {
  // 20 columns split by 16: the tail's guard sits inside the 16-wide loop.
  const Tensor a = placeholder({4}, UInt(8), "A"), b = placeholder({20, 4}, Int(8), "B");
  const IterVar k = reduce_axis({0, 4}, "k");
  const Tensor c = compute(
      {20}, [&](Var j) { return sum(cast(Int(32), a(k)) * cast(Int(32), b(j, k)), k); }, "C");
  Schedule s = create_schedule({c});
  auto [o, in] = s[c].split(s[c].axis(0), 16);
  s[c].tensorize(in, dot_16x4_u8s8s32());
  try {
    lower(s, {a, b, c}, "bad");
    ADD_FAILURE() << "lowered";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidSchedule) << e.what();
    EXPECT_NE(std::string(e.what()).find("a guard if"), std::string::npos) << e.what();
  }
}

TEST(TensorizeTest, RefusesALoopSplitAway) {
  const Blocked t = blocked(2, 1, 2);
  Schedule s = tiled(t);
  Stage st = s[t.acc];
  st.tensorize(st.axis(2), dot_16x4_u8s8s32());
  st.split(st.axis(2), 4);
  expect_refused(s, t, {"tensorize dot_16x4_u8s8s32", "was split or fused since"});
}

TEST(TensorizeTest, RefusesAStageWithoutReduction) {
  const Tensor a = placeholder({16}, Int(32), "a");
  const Tensor b = compute(
      {16}, [&](Var i) { return a(i) + 1; }, "b");
  Schedule s = create_schedule({b});
  try {
    s[b].tensorize(s[b].axis(0), dot_16x4_u8s8s32());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidSchedule);
    EXPECT_NE(std::string(e.what()).find("not a reduction"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ktune::te
