// Golden tests: the printed IR of a few hand schedules, and the tightness of the GEMM micro-kernel.
#include <gtest/gtest.h>

#include "te/interpreter.h"
#include "te/ir_printer.h"
#include "te/ir_visitor.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "tests/te/poison.h"
#include "tests/te/te_ops.h"

namespace ktune::te {
namespace {

// 10 rows split by 4: the last row block is peeled off and its loop shortened to 2 rows, so
// neither loop needs a guard.
TEST(LowerGoldenTest, NonDivisibleSplitIsPeeled) {
  auto op = testing::matmul(10, 8, 4);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  auto [io, ii] = s[C].split(s[C].axis(0), 4);
  s[C].reorder({io, s[C].axis(1), ii});
  EXPECT_EQ(to_string(lower(s, op.args(), "mm_tail")),
            R"(void mm_tail(float32* A, float32* B, float32* C /*out*/) {
  for (C.i.o, 0, 2) {
    for (C.j, 0, 8) {
      for (C.i.i, 0, 4) {
        C[(((C.i.o*32) + (C.i.i*8)) + C.j)] = 0.0f;
        for (k, 0, 4) {
          C[(((C.i.o*32) + (C.i.i*8)) + C.j)] = (C[(((C.i.o*32) + (C.i.i*8)) + C.j)] + (A[(((C.i.o*16) + (C.i.i*4)) + k)]*B[((k*8) + C.j)]));
        }
      }
    }
  }
  for (C.j, 0, 8) {
    for (C.i.i, 0, 2) {
      C[(((C.i.i*8) + C.j) + 64)] = 0.0f;
      for (k, 0, 4) {
        C[(((C.i.i*8) + C.j) + 64)] = (C[(((C.i.i*8) + C.j) + 64)] + (A[(((C.i.i*4) + k) + 32)]*B[((k*8) + C.j)]));
      }
    }
  }
}
)");
}

// Without loop partitioning the tail is handled by one guard, hoisted above the reduction.
TEST(LowerGoldenTest, NonDivisibleSplitGuardIsHoisted) {
  auto op = testing::matmul(10, 8, 4);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  auto [io, ii] = s[C].split(s[C].axis(0), 4);
  s[C].reorder({io, s[C].axis(1), ii});
  LowerOptions o;
  o.partition_loops = false;
  EXPECT_EQ(to_string(lower(s, op.args(), "mm_tail", o)),
            R"(void mm_tail(float32* A, float32* B, float32* C /*out*/) {
  for (C.i.o, 0, 3) {
    for (C.j, 0, 8) {
      for (C.i.i, 0, 4) {
        if ((((C.i.o*4) + C.i.i) < 10)) {
          C[(((C.i.o*32) + (C.i.i*8)) + C.j)] = 0.0f;
          for (k, 0, 4) {
            C[(((C.i.o*32) + (C.i.i*8)) + C.j)] = (C[(((C.i.o*32) + (C.i.i*8)) + C.j)] + (A[(((C.i.o*16) + (C.i.i*4)) + k)]*B[((k*8) + C.j)]));
          }
        }
      }
    }
  }
}
)");
}

TEST(LowerGoldenTest, GemmMicroKernel) {
  auto op = testing::matmul(4, 16, 3);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  Tensor CC = s.cache_write(C, "local");
  auto [io, jo, ii, ji] = s[C].tile(s[C].axis(0), s[C].axis(1), 2, 8);
  s[CC].compute_at(s[C], jo);
  s[CC].reorder({s[CC].reduce_axis(0), s[CC].axis(0), s[CC].axis(1)});
  s[CC].unroll(s[CC].axis(0));
  s[CC].vectorize(s[CC].axis(1));
  s[C].vectorize(ji);
  s[C].parallel(io);
  EXPECT_EQ(to_string(lower(s, op.args(), "gemm_micro")),
            R"(void gemm_micro(float32* A, float32* B, float32* C /*out*/) {
  parallel for (C.i.o, 0, 2) {
    for (C.j.o, 0, 2) {
      float32 C.local[16];
      C.local[ramp(0, 1, 8)] = x8(0.0f);
      C.local[ramp(8, 1, 8)] = x8(0.0f);
      for (C.local.k, 0, 3) {
        C.local[ramp(0, 1, 8)] = (C.local[ramp(0, 1, 8)] + (x8(A[((C.i.o*6) + C.local.k)])*B[ramp(((C.local.k*16) + (C.j.o*8)), 1, 8)]));
        C.local[ramp(8, 1, 8)] = (C.local[ramp(8, 1, 8)] + (x8(A[(((C.i.o*6) + C.local.k) + 3)])*B[ramp(((C.local.k*16) + (C.j.o*8)), 1, 8)]));
      }
      for (C.i.i, 0, 2) {
        C[ramp((((C.i.o*32) + (C.i.i*16)) + (C.j.o*8)), 1, 8)] = C.local[ramp((C.i.i*8), 1, 8)];
      }
    }
  }
}
)");
}

TEST(LowerGoldenTest, InlinedPaddingClampsItsLoad) {
  auto op = testing::conv2d(1, 1, 4, 4, 1, 3, 3, 1, 1);
  Schedule s = create_schedule(op.outputs);
  s[s.node().stages[1].tensor].compute_inline();
  // The Select as it stands when its taps are not skipped (skip_padding_taps_test has the rest).
  LowerOptions o;
  o.skip_padding_taps = false;
  EXPECT_EQ(to_string(lower(s, op.args(), "conv_pad_inline", o)),
            R"(void conv_pad_inline(float32* X, float32* W, float32* conv /*out*/) {
  for (conv.k, 0, 4) {
    for (conv.l, 0, 4) {
      conv[((conv.k*4) + conv.l)] = 0.0f;
      for (ry, 0, 3) {
        for (rx, 0, 3) {
          conv[((conv.k*4) + conv.l)] = (conv[((conv.k*4) + conv.l)] + (select((((((conv.k + ry) >= 1) && ((conv.k + ry) < 5)) && ((conv.l + rx) >= 1)) && ((conv.l + rx) < 5)), X[max(min((((((conv.k*4) + (ry*4)) + conv.l) + rx) - 5), 15), 0)], 0.0f)*W[((ry*3) + rx)]));
        }
      }
    }
  }
}
)");
}

TEST(LowerGoldenTest, SoftmaxDefaultSchedule) {
  auto op = testing::softmax(4, 8);
  Schedule s = create_schedule(op.outputs);
  EXPECT_EQ(to_string(lower(s, op.args(), "softmax")),
            R"(void softmax(float32* X, float32* softmax /*out*/) {
  float32 maxelem[4];
  float32 exp[32];
  float32 expsum[4];
  for (maxelem.i, 0, 4) {
    maxelem[maxelem.i] = -inf;
    for (k1, 0, 8) {
      maxelem[maxelem.i] = max(maxelem[maxelem.i], X[((maxelem.i*8) + k1)]);
    }
  }
  for (exp.i, 0, 4) {
    for (exp.j, 0, 8) {
      exp[((exp.i*8) + exp.j)] = exp((X[((exp.i*8) + exp.j)] - maxelem[exp.i]));
    }
  }
  for (expsum.i, 0, 4) {
    expsum[expsum.i] = 0.0f;
    for (k2, 0, 8) {
      expsum[expsum.i] = (expsum[expsum.i] + exp[((expsum.i*8) + k2)]);
    }
  }
  for (softmax.i, 0, 4) {
    for (softmax.j, 0, 8) {
      softmax[((softmax.i*8) + softmax.j)] = (exp[((softmax.i*8) + softmax.j)] / expsum[softmax.i]);
    }
  }
}
)");
}

TEST(LowerGoldenTest, FusedLoopWithPackedRow) {
  auto op = testing::matmul(6, 4, 4);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  Tensor AS = s.cache_read(op.inputs[0], {C}, "shared");
  IterVar f = s[C].fuse(s[C].axis(0), s[C].axis(1));
  auto [fo, fi] = s[C].split(f, 4);
  s[AS].compute_at(s[C], fo);
  EXPECT_EQ(to_string(lower(s, op.args(), "fused_packed")),
            R"(void fused_packed(float32* A, float32* B, float32* C /*out*/) {
  for (C.i.C.j.f.o, 0, 6) {
    float32 A.shared[4];
    for (A.shared.j, 0, 4) {
      A.shared[A.shared.j] = A[((C.i.C.j.f.o*4) + A.shared.j)];
    }
    for (C.i.C.j.f.i, 0, 4) {
      C[((C.i.C.j.f.o*4) + C.i.C.j.f.i)] = 0.0f;
      for (k, 0, 4) {
        C[((C.i.C.j.f.o*4) + C.i.C.j.f.i)] = (C[((C.i.C.j.f.o*4) + C.i.C.j.f.i)] + (A.shared[k]*B[((k*4) + C.i.C.j.f.i)]));
      }
    }
  }
}
)");
}

// Counts what codegen will see.
struct IrCensus : IRVisitor {
  int allocs = 0, ifs = 0, vector_stores = 0, ramp_loads = 0, broadcast_loads = 0, fors = 0,
      vec_or_unrolled_fors = 0;
  int64_t alloc_extent = -1;
  void visit(const Allocate* op) override {
    ++allocs;
    alloc_extent = *as_const_int(op->extent);
    IRVisitor::visit(op);
  }
  void visit(const IfThenElse* op) override {
    ++ifs;
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    vector_stores += op->index.as<Ramp>() != nullptr;
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    ramp_loads += op->index.as<Ramp>() != nullptr;
    IRVisitor::visit(op);
  }
  void visit(const Broadcast* op) override {
    broadcast_loads += op->value.as<Load>() != nullptr;
    IRVisitor::visit(op);
  }
  void visit(const For* op) override {
    ++fors;
    vec_or_unrolled_fors +=
        op->for_kind == ForKind::kVectorized || op->for_kind == ForKind::kUnrolled;
    IRVisitor::visit(op);
  }
};

// The template the tuner's fast matmul configs use: tiles, an 8x16 register tile (cache_write),
// a packed B panel (cache_read), unrolled rows, vectorized columns, a parallel outer loop.
TEST(LowerGoldenTest, RegisterTiledGemmIsTight) {
  const int64_t M = 64, N = 64, K = 32;
  auto op = testing::matmul(M, N, K);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  Tensor CC = s.cache_write(C, "local");
  auto [io, jo, ii, ji] = s[C].tile(s[C].axis(0), s[C].axis(1), 8, 16);
  s[CC].compute_at(s[C], jo);
  auto [ko, ki] = s[CC].split(s[CC].reduce_axis(0), 4);
  s[CC].reorder({ko, ki, s[CC].axis(0), s[CC].axis(1)});
  s[CC].unroll(ki);
  s[CC].unroll(s[CC].axis(0));
  s[CC].vectorize(s[CC].axis(1));
  s[C].vectorize(ji);
  s[C].parallel(io);
  LoweredFunc f = lower(s, op.args(), "gemm");
  IrCensus census;
  census.visit_stmt(f.body);
  EXPECT_EQ(census.allocs, 1);
  EXPECT_EQ(census.alloc_extent, 128);  // exactly the 8x16 tile
  EXPECT_EQ(census.ifs, 0);             // every split divides: no guard
  EXPECT_EQ(census.vec_or_unrolled_fors, 0);
  // init 8 rows + 4*8 updates + 8 rows copied out (a loop body) are vector stores.
  EXPECT_EQ(census.vector_stores, 8 + 32 + 1);
  EXPECT_EQ(census.broadcast_loads, 32);  // A[i, k] broadcast once per row and k
  EXPECT_GE(census.ramp_loads, 32 * 2);   // B rows and the tile
  EXPECT_EQ(census.fors, 4);              // io (parallel), jo, ko, and the copy-out rows
  // And it computes the right thing.
  HostBuffer a({M, K}, Float(32)), b({K, N}, Float(32)), c({M, N}, Float(32));
  a.fill_random(11);
  b.fill_random(12);
  testing::poison(c);
  interpret(f, std::vector<HostBuffer*>{&a, &b, &c});
  auto ref = evaluate({C}, {{op.inputs[0], &a}, {op.inputs[1], &b}});
  EXPECT_LE(max_relative_error(c, ref[0]), 1e-5);
}

// B packed into a contiguous K x 16 panel once per column block, reused by every row block's
// register tile (attached above the tile's own stage).
TEST(LowerGoldenTest, PackedPanelReusedAcrossRegisterTiles) {
  const int64_t M = 64, N = 64, K = 32;
  auto op = testing::matmul(M, N, K);
  Schedule s = create_schedule(op.outputs);
  Tensor C = op.outputs[0];
  Tensor CC = s.cache_write(C, "local");
  Tensor BB = s.cache_read(op.inputs[1], {CC}, "packed");
  auto [io, jo, ii, ji] = s[C].tile(s[C].axis(0), s[C].axis(1), 8, 16);
  s[C].reorder({jo, io, ii, ji});
  s[CC].compute_at(s[C], io);
  s[CC].reorder({s[CC].reduce_axis(0), s[CC].axis(0), s[CC].axis(1)});
  s[CC].unroll(s[CC].axis(0));
  s[CC].vectorize(s[CC].axis(1));
  s[BB].compute_at(s[C], jo);
  s[BB].vectorize(s[BB].axis(1));
  s[C].vectorize(ji);
  s[C].parallel(jo);
  LoweredFunc f = lower(s, op.args(), "gemm_packed");
  const For* outer = f.body.as<For>();
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->for_kind, ForKind::kParallel);
  const Allocate* panel = outer->body.as<Allocate>();
  ASSERT_NE(panel, nullptr);
  EXPECT_EQ(panel->buffer.name(), "B.packed");
  EXPECT_TRUE(is_const_int(panel->extent, K * 16));
  IrCensus census;
  census.visit_stmt(f.body);
  EXPECT_EQ(census.allocs, 2);
  EXPECT_EQ(census.ifs, 0);
  EXPECT_EQ(census.vec_or_unrolled_fors, 0);
  HostBuffer a({M, K}, Float(32)), b({K, N}, Float(32)), c({M, N}, Float(32));
  a.fill_random(21);
  b.fill_random(22);
  testing::poison(c);
  interpret(f, std::vector<HostBuffer*>{&a, &b, &c});
  auto ref = evaluate({C}, {{op.inputs[0], &a}, {op.inputs[1], &b}});
  EXPECT_LE(max_relative_error(c, ref[0]), 1e-5);
}

TEST(LowerGoldenTest, DumpsEveryPass) {
  auto op = testing::matmul(4, 4, 4);
  Schedule s = create_schedule(op.outputs);
  s.skip_padding_taps(true);  // the pass runs only where the schedule asks
  std::vector<std::string> passes;
  LowerOptions o;
  o.on_pass = [&](const std::string& name, const Stmt& body) {
    passes.push_back(name);
    EXPECT_TRUE(body.defined());
  };
  lower(s, op.args(), "mm", o);
  EXPECT_EQ(passes, (std::vector<std::string>{"schedule_ops", "storage_flatten", "simplify",
                                              "skip_padding_taps", "cut_border_tiles",
                                              "clamp_select_loads", "partition_loops",
                                              "unroll_loops", "vectorize_loops", "remove_no_ops"}));
}

}  // namespace
}  // namespace ktune::te
