// The fma_peak template: the calibration kernel a tuning server sends every device worker at
// attach, whose speed bounds what the device's records may claim (rpc_runner's peer_checks).
#include <vector>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kName = "fma_peak";

struct Shape {
  int64_t lanes, rows, depth, sweeps, copies;
};

Shape shape_of(const WorkloadArgs& a) {
  return {a.get_int("lanes"), a.get_int("rows"), a.get_int("depth"), a.get_int("sweeps"),
          a.get_int("copies")};
}

// C[p][r][l] = sum over s < sweeps, k < depth of A[p][r][l] * B[k][l], accumulated in that order
// from 0: per copy, `rows` independent vector accumulators of `lanes` lanes, each step one vector
// load of B for `rows` FMAs with A's rows held in registers. B stays in L1 (depth x lanes floats);
// the sweeps repeat the same products, which no compiler folds (float addition does not
// reassociate), and each copy has its own A, so that its outputs prove it ran (a server checks
// some of them, calibration_proof.h). On a 2-vCPU Intel Xeon guest (AVX-512) one copy runs at 242
// GFLOP/s, 99% of a hand-written FMA loop's 245.
struct Tensors {
  te::Tensor a, b, c;
};

Tensors make_tensors(const Shape& sh) {
  Tensors t;
  t.a = te::placeholder({sh.copies, sh.rows, sh.lanes}, te::Float(32), "A");
  t.b = te::placeholder({sh.depth, sh.lanes}, te::Float(32), "B");
  const te::IterVar s = te::reduce_axis({0, sh.sweeps}, "s");
  const te::IterVar k = te::reduce_axis({0, sh.depth}, "k");
  const te::Tensor a = t.a, b = t.b;
  t.c = te::compute(
      {sh.copies, sh.rows, sh.lanes},
      [&](te::Var p, te::Var r, te::Var l) {
        return te::sum(a(p, r, l) * b(k, l), {s, k});
      },
      "C");
  return t;
}

// One schedule: the copies in parallel; in a copy, the sweeps and k outermost, the rows unrolled
// and the lanes vectorized, so the accumulators live in registers (a GEMM micro-kernel's inner
// loop with nothing else in it).
Instantiated apply(const WorkloadArgs& args) {
  Tensors t = make_tensors(shape_of(args));
  te::Schedule s = te::create_schedule({t.c});
  const te::Tensor acc = s.cache_write(t.c, "local");
  te::Stage out = s[t.c];
  out.parallel(out.axis(0));
  out.vectorize(out.axis(2));
  te::Stage a = s[acc];
  a.compute_at(out, out.axis(0));
  a.reorder({a.axis(0), a.reduce_axis(0), a.reduce_axis(1), a.axis(1), a.axis(2)});
  a.unroll(a.axis(1));
  a.vectorize(a.axis(2));
  return Instantiated{s, {t.a, t.b, t.c}};
}

}  // namespace

void register_fma_peak_template(TemplateRegistry& r) {
  TemplateDef d;
  d.name = kName;
  d.doc =
      "calibration: C[copies,rows,lanes] = sum over sweeps x depth of A[copies,rows,lanes] * "
      "B[depth,lanes] "
      "(a device's fp32 FMA peak, per core with copies=1 on one thread, on all cores with one copy "
      "per core)";
  d.args = {int_arg("lanes", "16", "fp32 lanes of the target's vectors"),
            int_arg("rows", "12", "independent accumulators per copy (registers)"),
            int_arg("depth", "256", "reduction length (B stays in L1)"),
            int_arg("sweeps", "64", "passes over the reduction per call"),
            int_arg("copies", "1", "independent copies, run in parallel")};
  d.compute = [](const WorkloadArgs& a) {
    const Tensors t = make_tensors(shape_of(a));
    return ComputeDef{{t.a, t.b, t.c}, {t.c}};
  };
  d.flop = [](const WorkloadArgs& a) {
    const Shape sh = shape_of(a);
    return 2.0 * static_cast<double>(sh.copies * sh.rows * sh.lanes) *
           static_cast<double>(sh.depth * sh.sweeps);
  };
  // One config: the schedule is the kernel's definition, not a space to search.
  d.define = [](const WorkloadArgs&, const TargetTraits&, ConfigSpace& space) {
    space.define_knob("schedule", std::vector<int64_t>{0});
  };
  d.apply = [](const WorkloadArgs& a, const TargetTraits&, const Config&) { return apply(a); };
  r.add(std::move(d));
}

}  // namespace ktune::schedule_space::templates
