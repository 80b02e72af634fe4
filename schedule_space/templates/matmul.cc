// Built-in GEMM templates: matmul (B row-major or transposed), dense + bias + relu, batch_matmul.
#include <optional>
#include <tuple>

#include "schedule_space/template_registry.h"
#include "schedule_space/templates/common.h"
#include "schedule_space/templates/epilogue.h"
#include "schedule_space/templates/gemm.h"
#include "schedule_space/templates/softmax_prologue.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

ArgSpec size_arg(const char* name, const char* doc) {
  return {.name = name, .default_value = "", .doc = doc};
}

// The epilogue arguments of matmul and dense: what follows the product in the same tile loop.
// Left out of the workload key at their default, so older keys stay valid.
std::vector<ArgSpec> gemm_epilogue_args(bool none, const char* def, const char* out) {
  return epilogue_args({.none = none,
                        .default_value = def,
                        .bias_doc = "bias[N]",
                        .residual_doc = std::string("residual like ") + out});
}

// The epilogue of a matmul or dense workload and its inputs: bias[N], residual[M,N].
struct GemmEpilogue {
  Epilogue steps;
  EpilogueInputs inputs;
};

GemmEpilogue gemm_epilogue(const WorkloadArgs& w, te::DataType dt) {
  const int64_t M = w.get_int("M"), N = w.get_int("N");
  GemmEpilogue e;
  e.steps = epilogue_of(w);
  e.inputs = epilogue_inputs(e.steps, {N}, {M, N}, dt);
  return e;
}

// The epilogue applied to element (i, j) of the product `v`.
te::Expr apply_gemm_epilogue(const GemmEpilogue& e, const te::Expr& v, const te::Var& i,
                             const te::Var& j, te::DataType dt) {
  const te::Tensor bias = e.inputs.bias, res = e.inputs.residual;
  return e.steps.apply(v, bias.defined() ? bias(j) : te::Expr(),
                       res.defined() ? res(i, j) : te::Expr(), dt);
}

ArgSpec layout_arg() {
  return {.name = "layout",
          .type = ArgSpec::Type::kString,
          .default_value = "nn",
          .doc = "nn: B is [K,N] (row-major); nt: B is [N,K] (transposed)",
          .choices = {"nn", "nt"}};
}

// ----- matmul: C[M,N] = A[M,K] * B ---------------------------------------------------------------

struct MatmulTensors {
  te::Tensor a, b, packed, c;
  te::Tensor
      dot;  // with an epilogue (or a_softmax's normalization): the product c is computed from
  EpilogueInputs epilogue;
  std::optional<SoftmaxPrologue> softmax;  // batch_matmul's a_softmax
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {a, b};
    epilogue.append_to(v);
    v.push_back(c);
    return v;
  }
};

// With pack (nn): the panel is a cache_read added by the schedule. With pack (nt): an explicit
// transposing stage so that the register tile reads contiguous columns.
MatmulTensors matmul_tensors(const WorkloadArgs& w, bool transposed_pack) {
  const int64_t M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  const bool nt = w.get("layout") == "nt";
  const te::DataType dt = dtype_of(w.get("dtype"));
  MatmulTensors t;
  t.a = te::placeholder({M, K}, dt, "A");
  t.b = te::placeholder(nt ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, dt, "B");
  if (nt && transposed_pack) {
    const te::Tensor b = t.b;
    t.packed = te::compute(
        {K, N}, [&](te::Var k, te::Var j) { return b(j, k); }, "B_pack");
  }
  const te::IterVar k = te::reduce_axis({0, K}, "k");
  const te::Tensor a = t.a, b = t.b, p = t.packed;
  const GemmEpilogue epilogue = gemm_epilogue(w, dt);
  t.c = te::compute(
      {M, N},
      [&](te::Var i, te::Var j) {
        te::Expr bv = p.defined() ? p(k, j) : (nt ? b(j, k) : b(k, j));
        return te::sum(a(i, k) * bv, k);
      },
      epilogue.steps.empty() ? "C" : "dot");
  if (epilogue.steps.empty()) return t;
  t.dot = t.c;
  t.epilogue = epilogue.inputs;
  const te::Tensor dot = t.dot;
  t.c = te::compute(
      {M, N},
      [&](te::Var i, te::Var j) { return apply_gemm_epilogue(epilogue, dot(i, j), i, j, dt); },
      "C");
  return t;
}

// The dot-product form of a GEMV with W stored [N,K] (dense, matmul layout=nt): per output,
// `lanes` partial sums along k (vector loads of X and W rows, no gather), then one horizontal sum,
// the k remainder and the epilogue.
// partial[M,N,L] = sum_ko X[i, ko*L + l] * W[j, ko*L + l] over the K / L whole vectors.
// Returns the schedule with the arguments x, w, [bias,] [residual,] y.
Instantiated gemv_dot(const te::Tensor& x, const te::Tensor& w, const GemmEpilogue& epilogue,
                      const std::string& out_name, const Config& cfg, int64_t L) {
  const int64_t M = x.shape()[0], N = w.shape()[0], K = x.shape()[1], Kq = K / L, Kr = K % L;
  if (L < 1 || (L & (L - 1)) != 0)
    throw Error(ErrorKind::kInstantiation, "dot_lanes must be a power of two");
  const te::DataType dt = x.dtype();
  const te::IterVar ko = te::reduce_axis({0, Kq}, "ko");
  const te::Expr el(L);
  const te::Tensor partial = te::compute(
      {M, N, L},
      [&](te::Var i, te::Var j, te::Var l) {
        return te::sum(x(i, ko.var * el + l) * w(j, ko.var * el + l), ko);
      },
      "partial");
  // The horizontal sum as a tree of vector adds, halving the lanes each stage: a scalar loop
  // over the lanes is a chain of L dependent adds per output (the order of float adds is kept
  // as written), which cost as much as the k loop itself at K = 512.
  std::vector<te::Tensor> halves;
  te::Tensor lanes = partial;
  for (int64_t h = L / 2; h >= 1; h /= 2) {
    const te::Tensor prev = lanes;
    const te::Expr half(h);
    lanes = te::compute(
        {M, N, h},
        [&](te::Var i, te::Var j, te::Var l) { return prev(i, j, l) + prev(i, j, l + half); },
        "half" + std::to_string(h));
    halves.push_back(lanes);
  }
  const te::Tensor hsum = lanes;
  te::Tensor rest;
  if (Kr > 0) {
    const te::IterVar r = te::reduce_axis({0, Kr}, "r");
    const te::Expr base(Kq * L);
    rest = te::compute(
        {M, N},
        [&](te::Var i, te::Var j) { return te::sum(x(i, base + r.var) * w(j, base + r.var), r); },
        "rest");
  }
  const te::Tensor y = te::compute(
      {M, N},
      [&](te::Var i, te::Var j) {
        te::Expr v = hsum(i, j, 0);
        if (rest.defined()) v = v + rest(i, j);
        return apply_gemm_epilogue(epilogue, v, i, j, dt);
      },
      out_name);
  // dot_block outputs of dot_rows rows at a time: that many vector accumulators live across the k
  // loop. The row blocks of X inside the block of W rows: those W rows (8 K floats) stay in L1
  // for every row of X, and W, the large operand, is read from memory once (batch 8, N=1000,
  // K=512: rows outside re-read all of W per row, 0.66x OpenBLAS's sgemm). Several rows of X per
  // tile load each W vector once for all of them.
  te::Schedule s = te::create_schedule({y});
  te::Stage ys = s[y];
  auto [jo, ji] = ys.split(ys.axis(1), dot_block(dot_rows(cfg)));
  auto [io, ii] = ys.split(ys.axis(0), dot_rows(cfg));
  ys.reorder({jo, io, ii, ji});
  const te::IterVar outer = ys.fuse(jo, io);
  if (cfg["parallel"].as_int() != 0) ys.parallel(outer);
  te::Stage ps = s[partial];
  ps.compute_at(ys, outer);
  ps.reorder({ps.reduce_axis(0), ps.axis(0), ps.axis(1), ps.axis(2)});
  ps.unroll(ps.axis(0));
  ps.unroll(ps.axis(1));
  ps.vectorize(ps.axis(2));
  for (const te::Tensor& h : halves) {
    te::Stage hs = s[h];
    hs.compute_at(ys, outer);
    // The last two stages (2 and 1 lanes) stay scalar: a vector narrower than a NEON or SSE
    // register buys nothing over two scalar adds.
    if (h.shape()[2] >= 4) hs.vectorize(hs.axis(2));
  }
  if (rest.defined()) s[rest].compute_at(ys, outer);
  (void)ii;
  (void)ji;
  std::vector<te::Tensor> args = {x, w};
  epilogue.inputs.append_to(args);
  args.push_back(y);
  return Instantiated{s, args};
}

Instantiated dense_dot(const WorkloadArgs& a, const Config& cfg, int64_t L) {
  const te::DataType dt = dtype_of(a.get("dtype"));
  const int64_t M = a.get_int("M"), N = a.get_int("N"), K = a.get_int("K");
  return gemv_dot(te::placeholder({M, K}, dt, "X"), te::placeholder({N, K}, dt, "W"),
                  gemm_epilogue(a, dt), "Y", cfg, L);
}

// matmul layout=nt as a GEMV in dot-product form: the same arguments as matmul_tensors'.
Instantiated matmul_dot(const WorkloadArgs& a, const Config& cfg, int64_t L) {
  const te::DataType dt = dtype_of(a.get("dtype"));
  const int64_t M = a.get_int("M"), N = a.get_int("N"), K = a.get_int("K");
  return gemv_dot(te::placeholder({M, K}, dt, "A"), te::placeholder({N, K}, dt, "B"),
                  gemm_epilogue(a, dt), "C", cfg, L);
}

// The definition hooks matmul and batch_matmul share: `tensors` builds the tensors (with a
// transposed copy of B to pack when asked), `batch_axes` leading batch axes come before M, N.
void add_gemm_hooks(TemplateDef& d, MatmulTensors (*tensors)(const WorkloadArgs&, bool),
                    int batch_axes) {
  d.compute = [tensors](const WorkloadArgs& w) {
    MatmulTensors t = tensors(w, false);
    return ComputeDef{t.args(), {t.c}};
  };
  d.flop = [batch_axes](const WorkloadArgs& w) {
    const double batch = batch_axes > 0 ? static_cast<double>(w.get_int("batch")) : 1.0;
    const double outputs =
        batch * static_cast<double>(w.get_int("M")) * static_cast<double>(w.get_int("N"));
    const double epilogue = batch_axes > 0 ? 0 : epilogue_of(w).flop();
    return outputs * (2.0 * static_cast<double>(w.get_int("K")) + epilogue);
  };
  // matmul with B stored [N,K] has the dot-product form for up to 16 rows (as dense has); with B
  // stored [K,N], GEMVs and the smallest batches have the row stream.
  d.define = [batch_axes](const WorkloadArgs& w, const TargetTraits& target, ConfigSpace& space) {
    define_gemm_space(w.get_int("M"), w.get_int("N"), w.get_int("K"), dtype_of(w.get("dtype")).bits,
                      target, space, batch_axes == 0 && w.get("layout") == "nt",
                      w.get("layout") == "nn", batch_axes > 0);
  };
  d.fallback = [](const WorkloadArgs& w, const TargetTraits& target, const ConfigSpace& space) {
    return gemm_fallback(w.get_int("M"), w.get_int("N"), w.get_int("K"),
                         dtype_of(w.get("dtype")).bits, target, space);
  };
  d.apply = [tensors, batch_axes](const WorkloadArgs& w, const TargetTraits&, const Config& cfg) {
    if (const int64_t lanes = dot_lanes(cfg); lanes > 0) return matmul_dot(w, cfg, lanes);
    const bool pack = cfg["pack_b"].as_int() != 0;
    MatmulTensors t = tensors(w, pack);
    te::Schedule s = te::create_schedule({t.c});
    // An epilogue stage is the tiled output and the product its register tile; otherwise the
    // register tile is a local copy of the output.
    GemmStages g{s,        t.c,        t.dot.defined() ? t.dot : s.cache_write(t.c, "local"),
                 t.packed, batch_axes, batch_axes > 0 && w.get_int("c_heads") > 0,
                 {}};
    if (pack && !t.packed.defined()) g.pack = s.cache_read(t.b, {g.acc}, "pack");
    if (t.softmax)
      g.per_panel = [p = *t.softmax](te::Schedule& sch, const te::Stage& out,
                                     const te::IterVar& panel) { p.schedule(sch, out, panel); };
    schedule_gemm(g, cfg, w.get_int("M"), w.get_int("N"), w.get_int("K"));
    return Instantiated{s, t.args()};
  };
}

void register_matmul(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "matmul";
  d.doc =
      "C[M,N] = A[M,K] * B[K,N] (layout=nt: B is [N,K]); epilogue: C = act(A * B + bias[N] + "
      "residual[M,N]) in "
      "the tile loop";
  d.args = {size_arg("M", "rows of A and C"), size_arg("N", "columns of B and C"),
            size_arg("K", "reduction length"), layout_arg()};
  for (ArgSpec& e : gemm_epilogue_args(true, "none", "C")) d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.resolve = resolve_epilogue;
  d.check = [](const WorkloadArgs& w) { check_epilogue("matmul", w); };
  add_gemm_hooks(d, matmul_tensors, 0);
  r.add(std::move(d));
}

// ----- dense + bias + relu: Y[M,N] = max(X[M,K] * W[N,K]^T + bias[N], 0) ------------------------

struct DenseTensors {
  te::Tensor x, w, packed, dot, y;
  EpilogueInputs epilogue;
  std::vector<te::Tensor> args() const {
    std::vector<te::Tensor> v = {x, w};
    epilogue.append_to(v);
    v.push_back(y);
    return v;
  }
};

DenseTensors dense_tensors(const WorkloadArgs& a, bool pack) {
  const int64_t M = a.get_int("M"), N = a.get_int("N"), K = a.get_int("K");
  const te::DataType dt = dtype_of(a.get("dtype"));
  DenseTensors t;
  t.x = te::placeholder({M, K}, dt, "X");
  t.w = te::placeholder({N, K}, dt, "W");
  const GemmEpilogue epilogue = gemm_epilogue(a, dt);
  t.epilogue = epilogue.inputs;
  const te::Tensor x = t.x, w = t.w;
  if (pack)
    t.packed = te::compute(
        {K, N}, [&](te::Var k, te::Var j) { return w(j, k); }, "W_pack");
  const te::Tensor p = t.packed;
  const te::IterVar k = te::reduce_axis({0, K}, "k");
  t.dot = te::compute(
      {M, N},
      [&](te::Var i, te::Var j) { return te::sum(x(i, k) * (p.defined() ? p(k, j) : w(j, k)), k); },
      "dot");
  const te::Tensor dot = t.dot;
  t.y = te::compute(
      {M, N},
      [&](te::Var i, te::Var j) { return apply_gemm_epilogue(epilogue, dot(i, j), i, j, dt); },
      "Y");
  return t;
}

void register_dense(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "dense_bias_relu";
  d.doc =
      "Y[M,N] = relu(X[M,K] * W[N,K]^T + bias[N]) (epilogue: another activation, a residual[M,N]), "
      "fused into "
      "the GEMM tile";
  d.args = {size_arg("M", "batch rows"), size_arg("N", "output features"),
            size_arg("K", "input features")};
  for (ArgSpec& e : gemm_epilogue_args(false, "bias_relu", "Y")) d.args.push_back(std::move(e));
  d.args.push_back(dtype_arg());
  d.resolve = resolve_epilogue;
  d.check = [](const WorkloadArgs& w) { check_epilogue("dense_bias_relu", w); };
  d.compute = [](const WorkloadArgs& w) {
    DenseTensors t = dense_tensors(w, false);
    return ComputeDef{t.args(), {t.y}};
  };
  d.flop = [](const WorkloadArgs& w) {
    const double m = static_cast<double>(w.get_int("M")), n = static_cast<double>(w.get_int("N"));
    return m * n * (2.0 * static_cast<double>(w.get_int("K")) + epilogue_of(w).flop());
  };
  d.define = [](const WorkloadArgs& w, const TargetTraits& target, ConfigSpace& space) {
    define_gemm_space(w.get_int("M"), w.get_int("N"), w.get_int("K"), dtype_of(w.get("dtype")).bits,
                      target, space, true);
  };
  d.fallback = [](const WorkloadArgs& w, const TargetTraits& target, const ConfigSpace& space) {
    return gemm_fallback(w.get_int("M"), w.get_int("N"), w.get_int("K"),
                         dtype_of(w.get("dtype")).bits, target, space);
  };
  d.apply = [](const WorkloadArgs& w, const TargetTraits&, const Config& cfg) {
    if (const int64_t lanes = dot_lanes(cfg); lanes > 0) return dense_dot(w, cfg, lanes);
    DenseTensors t = dense_tensors(w, cfg["pack_b"].as_int() != 0);
    te::Schedule s = te::create_schedule({t.y});
    schedule_gemm({s, t.y, t.dot, t.packed, 0, false, {}}, cfg, w.get_int("M"), w.get_int("N"),
                  w.get_int("K"));
    return Instantiated{s, t.args()};
  };
  r.add(std::move(d));
}

// ----- batch_matmul: C[B,M,N] = A[B,M,K] * B[B,K,N] ----------------------------------------------

// How an operand of batch_matmul is stored: [batch, rows, cols], or with `heads` > 0 as
// [rows, heads, cols] with matrix q of the batch in slot `head` + q of every row. The second is
// an attention's packed projection [tokens, 3 x heads x dim] as it comes out of the product: q, k
// and v read in place instead of after a Transpose to [3, heads, tokens, dim].
struct OperandLayout {
  int64_t heads = 0, head = 0;
  te::Tensor placeholder(int64_t batch, int64_t rows, int64_t cols, te::DataType dt,
                         const char* name) const {
    return te::placeholder(heads > 0 ? std::vector<int64_t>{rows, heads, cols}
                                     : std::vector<int64_t>{batch, rows, cols},
                           dt, name);
  }
  // Element (row r, column c) of matrix q.
  te::Expr at(const te::Tensor& t, const te::Expr& q, const te::Expr& r, const te::Expr& c) const {
    return heads > 0 ? t(r, q + head, c) : t(q, r, c);
  }
};

OperandLayout operand_layout(const WorkloadArgs& w, const std::string& operand) {
  return {w.get_int(operand + "_heads"), w.get_int(operand + "_head")};
}

MatmulTensors batch_tensors(const WorkloadArgs& w, bool transposed_pack) {
  const int64_t Bn = w.get_int("batch"), M = w.get_int("M"), N = w.get_int("N"), K = w.get_int("K");
  const bool nt = w.get("layout") == "nt";
  const te::DataType dt = dtype_of(w.get("dtype"));
  const OperandLayout la = operand_layout(w, "a"), lb = operand_layout(w, "b");
  MatmulTensors t;
  t.a = la.placeholder(Bn, M, K, dt, "A");
  t.b = nt ? lb.placeholder(Bn, N, K, dt, "B") : lb.placeholder(Bn, K, N, dt, "B");
  const te::Tensor a = t.a, b = t.b;
  if (nt && transposed_pack)
    t.packed = te::compute(
        {Bn, K, N}, [&](te::Var q, te::Var k, te::Var j) { return lb.at(b, q, j, k); }, "B_pack");
  const te::Tensor p = t.packed;
  if (w.get_int("a_softmax") != 0) t.softmax = softmax_prologue(a, softmax_scale(w));
  const te::Tensor e = t.softmax ? t.softmax->e : te::Tensor();
  const te::IterVar k = te::reduce_axis({0, K}, "k");
  const auto product = [&](const te::Var& q, const te::Var& i, const te::Var& j) {
    te::Expr bv = p.defined() ? p(q, k, j) : (nt ? lb.at(b, q, j, k) : lb.at(b, q, k, j));
    return te::sum((e.defined() ? e(q, i, k) : la.at(a, q, i, k)) * bv, k);
  };
  // c_heads: C written [M, batch, N], the heads side by side in each row as the projection
  // after attention reads them (no Transpose back to [tokens, heads, dim]).
  const bool rows_first = w.get_int("c_heads") > 0;
  const std::vector<int64_t> shape =
      rows_first ? std::vector<int64_t>{M, Bn, N} : std::vector<int64_t>{Bn, M, N};
  const auto at = [rows_first](const std::vector<te::Var>& v) {
    return rows_first ? std::tuple(v[1], v[0], v[2]) : std::tuple(v[0], v[1], v[2]);
  };
  t.c = te::compute(
      shape,
      [&](const std::vector<te::Var>& v) {
        const auto [q, i, j] = at(v);
        return product(q, i, j);
      },
      e.defined() ? "dot" : "C");
  if (!e.defined()) return t;
  // The deferred normalization: each output row times 1 / its probabilities' sum.
  t.dot = t.c;
  const te::Tensor dot = t.dot, inverse = t.softmax->inverse;
  t.c = te::compute(
      shape,
      [&](const std::vector<te::Var>& v) {
        const auto [q, i, j] = at(v);
        return dot.read({v[0], v[1], v[2]}) * inverse(q, i);
      },
      "C");
  return t;
}

// a_heads / a_head and b_heads / b_head: OperandLayout. Left out of the key at 0.
std::vector<ArgSpec> operand_layout_args(const char* operand) {
  const std::string o = operand;
  return {{.name = o + "_heads",
           .default_value = "0",
           .doc = "0: " + o + " is stored [batch,rows,cols]; H: [rows,H,cols], matrix q in slot " +
                  o + "_head+q of every row",
           .min_value = 0,
           .key_omits_default = true},
          {.name = o + "_head",
           .default_value = "0",
           .doc = "with " + o + "_heads: the slot of the batch's first matrix",
           .min_value = 0,
           .key_omits_default = true}};
}

void register_batch_matmul(TemplateRegistry& r) {
  TemplateDef d;
  d.name = "batch_matmul";
  d.doc =
      "C[batch,M,N] = A[batch,M,K] * B[batch,K,N] (layout=nt: B is [batch,N,K]; a_heads, b_heads: "
      "an operand read in place from the heads of a packed projection)";
  d.args = {
      size_arg("batch", "number of matrices"), size_arg("M", "rows"), size_arg("N", "columns"),
      size_arg("K", "reduction length"),       layout_arg(),          dtype_arg()};
  for (const char* o : {"a", "b"})
    for (ArgSpec& e : operand_layout_args(o)) d.args.push_back(std::move(e));
  d.args.push_back({.name = "c_heads",
                    .default_value = "0",
                    .doc = "0: C is stored [batch,M,N]; batch: [M,batch,N]",
                    .min_value = 0,
                    .key_omits_default = true});
  for (ArgSpec& p : softmax_prologue_args()) d.args.push_back(std::move(p));
  d.resolve = resolve_softmax_prologue;
  d.check = [](const WorkloadArgs& w) {
    check_softmax_prologue(w);
    for (const char* o : {"a", "b"}) {
      const OperandLayout l = operand_layout(w, o);
      if (l.heads == 0 ? l.head != 0 : l.head + w.get_int("batch") > l.heads)
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("batch_matmul: ") + o + "_head + batch must be at most " + o +
                        "_heads (and " + o + "_head 0 without " + o + "_heads)");
    }
    if (w.get_int("c_heads") != 0 && w.get_int("c_heads") != w.get_int("batch"))
      throw Error(ErrorKind::kInvalidArgument, "batch_matmul: c_heads must be 0 or the batch");
  };
  add_gemm_hooks(d, batch_tensors, 1);
  r.add(std::move(d));
}

}  // namespace

void register_gemm_templates(TemplateRegistry& r) {
  register_matmul(r);
  register_dense(r);
  register_batch_matmul(r);
}

}  // namespace ktune::schedule_space::templates
