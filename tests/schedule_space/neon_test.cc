// NEON schedules for Cortex-A72-class cores: the spaces and fallbacks of matmul, dense_bias_relu,
// conv2d_nchwc (and depthwise conv2d, pooling) for `-mcpu=cortex-a72` use 4-lane vectors and fit
// 32 registers; their objects (fallback and random configs) hold `fmla` on `.4s` vectors, the
// fallbacks without a vector spilled in their innermost loops; `ktune lower` states 128-bit
// vectors and prints whole NEON vectors only; every kernel matches the reference under
// qemu-aarch64-static; an SVE core (neoverse-v1) gets the same NEON code, also checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "tests/cli_util.h"
#include "tests/codegen/test_util.h"
#include "tests/schedule_space/reference_util.h"

namespace ktune::schedule_space {
namespace {

using testing::Case;

const char* const kA72 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
constexpr int kRandomConfigs = 4;  // per workload, besides the fallback

struct Workload {
  std::string template_name;
  std::vector<std::string> words;
  bool fma = true;  // its kernels multiply-add (pooling compares or adds)
  // Its vectors are whole NEON registers (GEMM and NCHWc spaces vectorize multiples of 4
  // lanes); the NCHW family vectorizes output columns, a divisor of the width.
  bool whole_vectors() const {
    return template_name != "conv2d" && template_name != "depthwise_conv2d" && fma;
  }
  std::string cli() const {
    std::string s = template_name;
    for (const auto& w : words) s += " " + w;
    return s;
  }
};

// Small enough for te's interpreter and qemu, large enough that the fallbacks take their full
// register tiles: matmul's 8 x 3-vector tile (N = 48), its 8 x 2 one (N = 32), dense's GEMM tile
// (M = 8) and its dot-product GEMV (M = 1), NCHWc with 16-wide (4-vector) oc blocks on a 7 x 14
// output (where x86's rule, 7 columns x 4 vectors, spills) and with 8-wide oc blocks; depthwise
// and pooling, whose x86-style fallback (8 channels x 2 rows) spills on NEON; one workload of
// each other template too.
std::vector<Workload> workloads() {
  return {
      {"matmul", {"M=48", "N=64", "K=64"}},
      {"matmul", {"M=32", "N=32", "K=40", "layout=nt", "epilogue=bias_relu"}},
      {"dense_bias_relu", {"M=8", "N=48", "K=32"}},
      {"dense_bias_relu", {"M=1", "N=40", "K=64"}},
      {"conv2d_nchwc", {"C=16", "H=9", "W=16", "K=32"}},
      {"conv2d_nchwc", {"C=16", "H=9", "W=14", "K=16", "oc_block=8", "epilogue=bias_relu"}},
      {"batch_matmul", {"batch=2", "M=24", "N=32", "K=16", "layout=nt"}},
      {"conv2d", {"C=8", "H=16", "W=16", "K=16", "pad=1"}},
      {"depthwise_conv2d", {"C=16", "H=28", "W=28", "pad=1"}},
      {"max_pool2d", {"C=16", "H=28", "W=28"}, false},
      {"avg_pool2d", {"C=16", "H=28", "W=28", "R=3", "S=3", "stride=2", "pad=1"}, false},
  };
}

Task task_of(const Workload& w, const codegen::Target& target) {
  return Task::create(w.template_name, parse_workload_args(w.template_name, w.words),
                      testing::traits_of(target));
}

// The object's disassembly by llvm-objdump-19 (empty when the tool is missing).
std::string disassemble(const codegen::Artifact& a) {
  char tmpl[] = "/tmp/ktune_neon_XXXXXX.o";
  const int fd = mkstemps(tmpl, 2);
  if (fd < 0) return "";
  close(fd);
  codegen::testing::write_file(tmpl, a.object.data(), a.object.size());
  const auto out = testing_cli::shell(
      "llvm-objdump-19 -d --no-show-raw-insn " + testing_cli::quote(tmpl), false);
  std::remove(tmpl);
  return out.status == 0 ? out.out : "";
}

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The instructions of the innermost loops of a disassembly: a loop is the range from a backward
// branch's target to the branch; innermost ones hold no other loop. One instruction a line.
std::string innermost_loops(const std::string& text) {
  struct Line {
    uint64_t addr;
    std::string text;
  };
  std::vector<Line> lines;
  std::vector<std::pair<uint64_t, uint64_t>> loops;
  const std::regex insn(R"(^\s*([0-9a-f]+):\s+(.*)$)");
  const std::regex branch(R"(^(b|b\.\w+|cbn?z|tbn?z)\s.*\b0x([0-9a-f]+) <)");
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::smatch m, b;
    if (!std::regex_match(l, m, insn)) continue;
    const uint64_t addr = std::stoull(m[1].str(), nullptr, 16);
    const std::string body = m[2].str();
    lines.push_back({addr, body});
    if (std::regex_search(body, b, branch)) {
      const uint64_t target = std::stoull(b[2].str(), nullptr, 16);
      if (target <= addr) loops.emplace_back(target, addr);
    }
  }
  std::string out;
  for (const auto& [lo, hi] : loops) {
    const bool innermost = std::none_of(loops.begin(), loops.end(), [&](const auto& o) {
      return o != std::make_pair(lo, hi) && lo <= o.first && o.second <= hi;
    });
    if (!innermost) continue;
    for (const Line& l : lines)
      if (lo <= l.addr && l.addr <= hi) out += l.text + "\n";
  }
  return out;
}

// Vector FMAs on four float lanes (`fmla v1.4s, v2.4s, v3.4s` or by element, `v3.s[0]`).
const std::regex kFmla4s(R"(\bfmla\s+v\d+\.4s, v\d+\.4s, v\d+\.(4s|s\[\d\]))");
// Scalar FMAs: what a kernel that failed to vectorize would use.
const std::regex kScalarFma(R"(\bfmadd\s+s\d+)");
// A 128-bit register stored to or loaded from the stack: a spilled vector (in an innermost loop,
// an accumulator or operand that did not fit the registers).
const std::regex kVectorSpill(R"(\b(str|ldr|stp|ldp|stur|ldur)\s+q\d+,( q\d+,)? \[sp)");

// The lane counts of the vectors in printed IR: the last argument of each `ramp(base, stride,
// lanes)` (base may nest parentheses) and N of each broadcast `xN(...)`.
std::set<int64_t> vector_widths(const std::string& ir) {
  std::set<int64_t> widths;
  for (size_t p = ir.find("ramp("); p != std::string::npos; p = ir.find("ramp(", p + 1)) {
    int depth = 0;
    size_t comma = std::string::npos, q = p + 4;
    for (; q < ir.size(); ++q) {
      if (ir[q] == '(') ++depth;
      if (ir[q] == ')' && --depth == 0) break;
      if (ir[q] == ',' && depth == 1) comma = q;
    }
    if (comma != std::string::npos && q < ir.size())
      widths.insert(std::stoll(ir.substr(comma + 1, q - comma - 1)));
  }
  const std::regex broadcast(R"(\bx(\d+)\()");
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), broadcast);
       it != std::sregex_iterator(); ++it)
    widths.insert(std::stoll((*it)[1].str()));
  return widths;
}

// Every space's constraint is sized for NEON: 4 lanes of float32, 32 registers, and a register
// tile that fits them with its operand vectors and the broadcast scalar.
TEST(Neon, SpacesUseFourLanesAndThirtyTwoRegisters) {
  const codegen::Target a72 = codegen::Target::parse(kA72);
  EXPECT_EQ(a72.vector_bits(), 128);
  const TargetTraits t = testing::traits_of(a72);
  EXPECT_EQ(t.vector_lanes(32), 4);
  EXPECT_EQ(t.vector_registers(), 32);
  EXPECT_EQ(t.accumulator_budget(3), 28);
  // SVE cores get the same 128-bit description (see TargetTraits).
  EXPECT_EQ(
      codegen::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1").vector_bits(),
      128);

  const Config fb = task_of({"matmul", {"M=48", "N=64", "K=64"}}, a72).fallback_config();
  EXPECT_EQ(fb["tile_y"].values.back(), 6);
  EXPECT_EQ(fb["tile_x"].values.back(), 16);  // 6 rows x 4 vectors: 24 + 4 + 1 registers
  const Config fb2 = task_of({"matmul", {"M=64", "N=64", "K=64"}}, a72).fallback_config();
  EXPECT_EQ(fb2["tile_y"].values.back(), 8);
  EXPECT_EQ(fb2["tile_x"].values.back(), 8);  // 8 rows x 2 vectors where 6 does not divide M
  // Every tile of the space fits: rows x vectors accumulators, the row's B vectors and the A
  // scalar (so 6 x 4 = 24 + 4 + 1 is in, 7 x 4 = 33 registers and 15 x 2 = 33 are out).
  const Task mm_odd = task_of({"matmul", {"M=42", "N=16", "K=8"}}, a72);
  std::vector<uint64_t> d =
      mm_odd.space().knob_indices(mm_odd.space().index_of(mm_odd.fallback_config()));
  const Knob& ty = mm_odd.space().knob(0);
  const Knob& tx = mm_odd.space().knob(1);
  int checked = 0;
  for (uint64_t i = 0; i < ty.size(); ++i) {
    for (uint64_t j = 0; j < tx.size(); ++j) {
      d[0] = i, d[1] = j;
      const int64_t rows = ty.entity(i).values.back(),
                    vectors = (tx.entity(j).values.back() + 3) / 4;
      EXPECT_EQ(mm_odd.space().is_valid(mm_odd.space().index_of(d)),
                rows * vectors + vectors + 1 <= 32)
          << rows << " x " << vectors;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);

  // Depthwise conv2d reuses no input across its tile: every accumulator has its own input
  // vector, so at most 15 accumulators (8 channels x 2 rows, 16, is out; x86 keeps it).
  const Workload dw{"depthwise_conv2d", {"C=16", "H=28", "W=28", "pad=1"}};
  for (const bool arm : {true, false}) {
    const Task t =
        arm ? task_of(dw, a72)
            : task_of(dw, codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
    std::vector<uint64_t> digits = t.space().knob_indices(t.space().index_of(t.fallback_config()));
    auto valid = [&](int64_t k, int64_t h) {
      for (int knob = 0; knob < 2; ++knob) {
        const Knob& kn = t.space().knob(knob);
        for (uint64_t i = 0; i < kn.size(); ++i)
          if (kn.entity(i).values.back() == (knob == 0 ? k : h)) digits[knob] = i;
      }
      return t.space().is_valid(t.space().index_of(digits));
    };
    EXPECT_EQ(valid(8, 2), !arm) << (arm ? "aarch64" : "x86");
    EXPECT_TRUE(valid(8, 1)) << (arm ? "aarch64" : "x86");
  }
  const Config dfb = task_of(dw, a72).fallback_config();
  EXPECT_EQ(dfb["tile_k"].values.back() * dfb["tile_oh"].values.back(), 8);
}

// The objects of the fallbacks and of random configs: NEON FMAs on 4 lanes, no scalar FMAs, no
// spilled vector in a fallback's innermost loops; then all of them against the reference under
// qemu.
TEST(Neon, CortexA72ObjectsUseFmlaOnFourLanesAndMatchReference) {
  const codegen::Target a72 = codegen::Target::parse(kA72);
  std::mt19937_64 rng(20261124);
  std::vector<Case> cases;
  std::vector<bool> is_fallback, fma;
  uint64_t seed = 1;
  for (const Workload& w : workloads()) {
    auto task = std::make_shared<const Task>(task_of(w, a72));
    auto ref = std::make_shared<const testing::Reference>(testing::reference_of(*task, seed++));
    cases.push_back({task, ref, task->fallback_config()});
    is_fallback.push_back(true);
    fma.push_back(w.fma);
    for (uint64_t i : task->space().sample(kRandomConfigs, rng)) {
      cases.push_back({task, ref, task->space().get(i)});
      is_fallback.push_back(false);
      fma.push_back(w.fma);
    }
  }
  std::vector<codegen::Artifact> artifacts;
  for (size_t i = 0; i < cases.size(); ++i)
    artifacts.push_back(testing::build_case(cases[i], a72, "neon" + std::to_string(i)));

  if (disassemble(artifacts[0]).empty())
    GTEST_SKIP() << "llvm-objdump-19 is missing: nothing disassembled";
  std::map<std::string, int> fmla_per_template;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string what =
        cases[i].task->workload_key() + " config " + cases[i].config.to_json_string();
    const std::string text = disassemble(artifacts[i]);
    const int fmla = count(text, kFmla4s);
    // A random config may vectorize one column only, or fewer than 4 (`fmla v0.2s`), and leave
    // a scalar tail: its object is checked under qemu only.
    if (is_fallback[i]) {
      EXPECT_EQ(fmla > 0, fma[i]) << what;
      EXPECT_EQ(count(text, kScalarFma), 0) << what;
      const std::string loops = innermost_loops(text);
      EXPECT_FALSE(loops.empty()) << what << ": no loop\n" << text;
      if (fma[i]) {
        EXPECT_GT(count(loops, kFmla4s), 0) << what << ": no fmla .4s in an innermost loop\n"
                                            << text;
      }
      EXPECT_EQ(count(loops, kVectorSpill), 0)
          << what << ": a vector spilled in an innermost loop\n"
          << loops;
    }
    if (fma[i]) {
      fmla_per_template[cases[i].task->template_name()] += fmla;
    }
  }
  EXPECT_EQ(fmla_per_template.size(), 6u);
  for (const auto& [name, n] : fmla_per_template) std::printf("%s: %d fmla .4s\n", name.c_str(), n);

  if (!codegen::testing::cross_tools_available())
    GTEST_SKIP() << "no aarch64-linux-gnu-g++ or qemu-aarch64-static: objects checked, not run";
  const std::vector<double> errors = testing::aarch64_errors(cases, artifacts);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_LT(errors[i], 1e-4) << cases[i].task->workload_key() << " config "
                               << cases[i].config.to_json_string();
  std::printf("%zu kernels checked under qemu\n", cases.size());
}

// An SVE core (Neoverse V1, 256-bit SVE) gets the same 128-bit NEON schedules: fallbacks with
// `fmla .4s`, which run correctly under qemu (its default CPU has SVE; LLVM adds a few SVE
// instructions of its own for index arithmetic in the NCHW kernels).
TEST(Neon, SveCoreGetsNeonFmlaAndMatchesReference) {
  const codegen::Target v1 =
      codegen::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1");
  std::vector<Case> cases;
  std::vector<codegen::Artifact> artifacts;
  uint64_t seed = 100;
  for (const Workload& w : workloads()) {
    auto task = std::make_shared<const Task>(task_of(w, v1));
    EXPECT_EQ(task->target().vector_lanes(32), 4);
    cases.push_back(
        {task, std::make_shared<const testing::Reference>(testing::reference_of(*task, seed++)),
         task->fallback_config()});
    artifacts.push_back(
        testing::build_case(cases.back(), v1, "sve" + std::to_string(cases.size())));
    const std::string text = disassemble(artifacts.back());
    if (text.empty()) GTEST_SKIP() << "llvm-objdump-19 is missing: nothing disassembled";
    EXPECT_EQ(count(text, kFmla4s) > 0, w.fma) << w.cli();
  }
  if (!codegen::testing::cross_tools_available())
    GTEST_SKIP() << "no aarch64-linux-gnu-g++ or qemu-aarch64-static: objects checked, not run";
  const std::vector<double> errors = testing::aarch64_errors(cases, artifacts);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_LT(errors[i], 1e-4) << cases[i].task->workload_key();
}

// `ktune lower --target <cortex-a72>` says 128-bit vectors and 32 registers, and the fallbacks'
// vectors are NEON-sized: at most 4 registers (16 float32 lanes), and for the GEMM and NCHWc
// templates whole registers (multiples of 4 lanes). (The NCHW family vectorizes a divisor of the
// output width up to one register: 2 lanes for a 14-wide output.)
TEST(Neon, LowerShowsWholeNeonVectors) {
  for (const Workload& w : workloads()) {
    const auto out =
        testing_cli::ktune("lower " + w.cli() + " --target " + testing_cli::quote(kA72));
    ASSERT_EQ(out.status, 0) << w.cli();
    EXPECT_NE(out.out.find(": 128-bit vectors, 32 vector registers\n"), std::string::npos)
        << out.out.substr(0, 300);
    const std::set<int64_t> seen = vector_widths(out.out);
    ASSERT_FALSE(seen.empty()) << w.cli() << ": no vector in\n" << out.out;
    for (int64_t n : seen) {
      EXPECT_LE(n, 16) << w.cli() << ": a vector of " << n << " lanes, more than 4 NEON registers";
      if (w.whole_vectors()) {
        EXPECT_EQ(n % 4, 0) << w.cli() << ": a vector of " << n << " lanes";
      }
    }
    if (w.whole_vectors()) {
      EXPECT_GE(*seen.rbegin(), 4) << w.cli() << ": no vector fills a NEON register";
    }
  }
  // The same workload for AVX-512 vectorizes by 16: the output above is the target's.
  const auto x86 =
      testing_cli::ktune("lower matmul M=48 N=64 K=64 --target " +
                         testing_cli::quote("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
  ASSERT_EQ(x86.status, 0);
  EXPECT_NE(x86.out.find(": 512-bit vectors, 32 vector registers\n"), std::string::npos);
  const std::set<int64_t> x86_widths = vector_widths(x86.out);
  ASSERT_FALSE(x86_widths.empty());
  for (int64_t n : x86_widths) EXPECT_EQ(n % 16, 0) << "x86: a vector of " << n << " lanes";
}

}  // namespace
}  // namespace ktune::schedule_space
