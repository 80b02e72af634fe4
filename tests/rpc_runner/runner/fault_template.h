// Defines the test-only templates "runner_fault_test" (a knob whose values make the kernel crash,
// hang or compute a wrong result, to exercise the local runner's isolation) and
// "runner_slow_build_test" (a knob that makes the build take far longer than any test's timeout).
#pragma once

#include <cstdint>

#include "schedule_space/task.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::rpc_runner::testing {

// C[i] = 2 * A[i] over N elements (the reference). Knobs: "mode" in {ok, crash, hang, wrong}
// and "split" in {1, 2, 4, 8} (inner factor of C's axis). Modes:
//   crash: reads A[i + 2^40], far outside any mapping -> SIGSEGV;
//   hang:  sums A over 2^40 iterations -> never ends within a test's timeout;
//   wrong: 2 * A[i] + 1.
inline void register_fault_template() {
  static const bool done = [] {
    schedule_space::TemplateDef def;
    def.name = "runner_fault_test";
    def.doc = "test only: a knob that makes the kernel crash, hang or be wrong";
    schedule_space::ArgSpec n;
    n.name = "N";
    n.default_value = "256";
    def.args = {n};
    def.compute = [](const schedule_space::WorkloadArgs& a) {
      int64_t n = a.get_int("N");
      te::Tensor A = te::placeholder({n}, te::Float(32), "A");
      te::Tensor C = te::compute(
          {n}, [&](const std::vector<te::Var>& i) { return A(i[0]) * 2.0f; }, "C");
      return schedule_space::ComputeDef{{A, C}, {C}};
    };
    def.flop = [](const schedule_space::WorkloadArgs& a) { return double(a.get_int("N")); };
    def.define = [](const schedule_space::WorkloadArgs&, const schedule_space::TargetTraits&,
                    schedule_space::ConfigSpace& space) {
      space.define_knob("mode", std::vector<std::string>{"ok", "crash", "hang", "wrong"});
      space.define_knob("split", std::vector<int64_t>{1, 2, 4, 8});
    };
    def.apply = [](const schedule_space::WorkloadArgs& a, const schedule_space::TargetTraits&,
                   const schedule_space::Config& config) {
      int64_t n = a.get_int("N");
      const std::string& mode = config["mode"].as_string();
      te::Tensor A = te::placeholder({n}, te::Float(32), "A");
      te::Tensor C;
      if (mode == "crash") {
        C = te::compute(
            {n},
            [&](const std::vector<te::Var>& i) {
              return A(i[0] + te::Expr(int64_t{1} << 40)) * 2.0f;
            },
            "C");
      } else if (mode == "hang") {
        te::IterVar k = te::reduce_axis({0, int64_t{1} << 40}, "k");
        C = te::compute(
            {n}, [&](const std::vector<te::Var>& i) { return te::sum(A((i[0] + k.var) % n), k); },
            "C");
      } else if (mode == "wrong") {
        C = te::compute(
            {n}, [&](const std::vector<te::Var>& i) { return A(i[0]) * 2.0f + 1.0f; }, "C");
      } else {
        C = te::compute(
            {n}, [&](const std::vector<te::Var>& i) { return A(i[0]) * 2.0f; }, "C");
      }
      te::Schedule s = te::create_schedule({C});
      s[C].split(s[C].axis(0), config["split"].as_int());
      return schedule_space::Instantiated{s, {A, C}};
    };
    schedule_space::register_template(def);
    return true;
  }();
  (void)done;
}

// C[i] = sum over k < 2^16 of A[(i + k) % N]. Knob "unroll" in {0, 1}: 1 splits k into 256 x 256
// and unrolls both loops, so lowering and LLVM face 65536 copies of the body (many seconds of
// build); 0 is a plain loop that builds in milliseconds.
inline void register_slow_build_template() {
  static const bool done = [] {
    schedule_space::TemplateDef def;
    def.name = "runner_slow_build_test";
    def.doc = "test only: a knob that makes the build very slow";
    schedule_space::ArgSpec n;
    n.name = "N";
    n.default_value = "64";
    def.args = {n};
    auto compute = [](int64_t n, te::Tensor& A, te::IterVar& k) {
      A = te::placeholder({n}, te::Float(32), "A");
      k = te::reduce_axis({0, int64_t{1} << 16}, "k");
      return te::compute(
          {n}, [&](const std::vector<te::Var>& i) { return te::sum(A((i[0] + k.var) % n), k); },
          "C");
    };
    def.compute = [compute](const schedule_space::WorkloadArgs& a) {
      te::Tensor A;
      te::IterVar k;
      te::Tensor C = compute(a.get_int("N"), A, k);
      return schedule_space::ComputeDef{{A, C}, {C}};
    };
    def.flop = [](const schedule_space::WorkloadArgs& a) { return double(a.get_int("N")) * 65536; };
    def.define = [](const schedule_space::WorkloadArgs&, const schedule_space::TargetTraits&,
                    schedule_space::ConfigSpace& space) {
      space.define_knob("unroll", std::vector<int64_t>{0, 1});
    };
    def.apply = [compute](const schedule_space::WorkloadArgs& a,
                          const schedule_space::TargetTraits&,
                          const schedule_space::Config& config) {
      te::Tensor A;
      te::IterVar k;
      te::Tensor C = compute(a.get_int("N"), A, k);
      te::Schedule s = te::create_schedule({C});
      if (config["unroll"].as_int() == 1) {
        auto [ko, ki] = s[C].split(s[C].reduce_axis(0), 256);
        s[C].unroll(ko);
        s[C].unroll(ki);
      }
      return schedule_space::Instantiated{s, {A, C}};
    };
    schedule_space::register_template(def);
    return true;
  }();
  (void)done;
}

}  // namespace ktune::rpc_runner::testing
