// library_op and library_race: oneDNN (convolution, pooling) and OpenBLAS (sgemm, sgemv) for a
// task's shape, in this process.
#include "baselines/library_baseline.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "baselines/placed_memories.h"
#include "codegen/runtime.h"
#include "support/error.h"
#include "te/host_buffer.h"

namespace ktune::baselines {
namespace {

// oneDNN's threads (its OpenMP runtime's) and OpenBLAS's.
void set_library_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Fills m with arbitrary contents (the time does not depend on the values).
dnnl::memory filled(dnnl::memory m) {
  auto* p = static_cast<float*>(m.get_data_handle());
  const size_t n = m.get_desc().get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  return m;
}

std::string onednn_name(const std::string& impl) {
  const auto* v = dnnl::version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + " (" + impl + ")";
}

// oneDNN's name for a memory's layout: its format tag for the plain and channel-blocked 4-D and
// 5-D formats a convolution or pooling primitive picks, else "blocked".
std::string layout_name(const dnnl::memory::desc& md) {
  const auto& b = md.data.format_desc.blocking;
  const int nd = md.data.ndims;
  if (b.inner_nblks == 0) {
    if (nd == 4) return b.strides[1] == 1 ? "nhwc" : "nchw";
    return "plain";
  }
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1)
    return "nC" + std::string(nd == 5 ? "dhw" : "hw") + std::to_string(b.inner_blks[0]) + "c";
  return "blocked";
}

// Argument `name` of `a` when the template declares it and it is set (>= `unset` + 1), else
// `otherwise`: the column stride and the side pads the blocked convs take.
int64_t arg_or(const schedule_space::WorkloadArgs& a, const std::string& name, int64_t unset,
               int64_t otherwise) {
  const std::map<std::string, std::string> m = a.to_map();
  if (!m.count(name)) return otherwise;
  const int64_t v = a.get_int(name);
  return v > unset ? v : otherwise;
}

LibraryOp conv_op(const schedule_space::WorkloadArgs& a, bool depthwise) {
  const int64_t N = a.get_int("N"), C = a.get_int("C"), H = a.get_int("H"), W = a.get_int("W");
  const int64_t K = depthwise ? C : a.get_int("K"), R = a.get_int("R"), S = a.get_int("S");
  const int64_t st = a.get_int("stride"), pad = a.get_int("pad"), dil = a.get_int("dilation");
  const int64_t st_w = arg_or(a, "stride_w", 0, st);
  const int64_t left = arg_or(a, "pad_left", -1, pad), bottom = arg_or(a, "pad_bottom", -1, pad),
                right = arg_or(a, "pad_right", -1, pad);
  const int64_t OH = (H + pad + bottom - dil * (R - 1) - 1) / st + 1,
                OW = (W + left + right - dil * (S - 1) - 1) / st_w + 1;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::dims w_dims =
      depthwise ? dnnl::memory::dims{C, 1, 1, R, S} : dnnl::memory::dims{K, C, R, S};
  const dnnl::memory::desc src({N, C, H, W}, dt::f32, tag::any), wts(w_dims, dt::f32, tag::any),
      dst({N, K, OH, OW}, dt::f32, tag::any);
  // oneDNN's dilation counts the gaps (0 = dense).
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wts, dst,
      {st, st_w}, {dil - 1, dil - 1}, {pad, left}, {bottom, right});
  const dnnl::convolution_forward::primitive_desc pd(desc, eng);
  struct State {
    dnnl::engine eng;
    dnnl::stream strm;
    PlacedMemories placed;
    dnnl::memory s, w, d;
    dnnl::convolution_forward conv;
  };
  auto p = std::make_shared<State>(State{eng, dnnl::stream(eng), {}, {}, {}, {}, {}});
  p->s = filled(p->placed.make(pd.src_desc(), eng));
  p->w = filled(p->placed.make(pd.weights_desc(), eng));
  p->d = p->placed.make(pd.dst_desc(), eng);
  p->conv = dnnl::convolution_forward(pd);
  return {onednn_name(pd.impl_info_str()), layout_name(pd.src_desc()), [p] {
            p->conv.execute(p->strm,
                            {{DNNL_ARG_SRC, p->s}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DST, p->d}});
            p->strm.wait();
          }};
}

LibraryOp pool_op(const schedule_space::WorkloadArgs& a, bool max) {
  const int64_t N = a.get_int("N"), C = a.get_int("C"), H = a.get_int("H"), W = a.get_int("W");
  const int64_t R = a.get_int("R"), S = a.get_int("S"), st = a.get_int("stride"),
                pad = a.get_int("pad");
  const int64_t OH = (H + 2 * pad - R) / st + 1, OW = (W + 2 * pad - S) / st + 1;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  // The tuned pooling kernels read NCHW; so does oneDNN here.
  const dnnl::memory::desc src({N, C, H, W}, dt::f32, tag::nchw),
      dst({N, C, OH, OW}, dt::f32, tag::nchw);
  const dnnl::pooling_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding, src, dst,
      {st, st}, {R, S}, {pad, pad}, {pad, pad});
  const dnnl::pooling_forward::primitive_desc pd(desc, eng);
  struct State {
    dnnl::engine eng;
    dnnl::stream strm;
    PlacedMemories placed;
    dnnl::memory s, d;
    dnnl::pooling_forward pool;
  };
  auto p = std::make_shared<State>(State{eng, dnnl::stream(eng), {}, {}, {}, {}});
  p->s = filled(p->placed.make(pd.src_desc(), eng));
  p->d = p->placed.make(pd.dst_desc(), eng);
  p->pool = dnnl::pooling_forward(pd);
  return {onednn_name(pd.impl_info_str()), "nchw", [p] {
            p->pool.execute(p->strm, {{DNNL_ARG_SRC, p->s}, {DNNL_ARG_DST, p->d}});
            p->strm.wait();
          }};
}

// C = A B (B [K,N], or [N,K] when `b_transposed`), row-major. M = 1 is a GEMV, which OpenBLAS
// 0.3.21's sgemm does not forward to its GEMV kernels: sgemv is what a user calls for it.
LibraryOp gemm_op(const schedule_space::WorkloadArgs& a, bool b_transposed) {
  const int M = static_cast<int>(a.get_int("M")), N = static_cast<int>(a.get_int("N")),
            K = static_cast<int>(a.get_int("K"));
  // Placed as the tuned kernel's buffers (support/placed_buffer.h).
  struct Buffers {
    PlacedBuffer a, b, c;
    float* A() const { return static_cast<float*>(a.get()); }
    float* B() const { return static_cast<float*>(b.get()); }
    float* C() const { return static_cast<float*>(c.get()); }
  };
  const auto floats = [](int64_t n, float v) {
    PlacedBuffer p = make_placed(n * 4);
    std::fill_n(static_cast<float*>(p.get()), n, v);
    return p;
  };
  auto b = std::make_shared<Buffers>(Buffers{
      floats(int64_t{M} * K, 0.5f), floats(int64_t{K} * N, 0.25f), floats(int64_t{M} * N, 0)});
  const std::string core = std::string("OpenBLAS ") + openblas_get_corename();
  if (M == 1) {
    // y[N] = x[K] B: B^T x for B [K,N], B x for B [N,K].
    return {core + " sgemv", "row-major", [b, N, K, b_transposed] {
              if (b_transposed)
                cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, b->B(), K, b->A(), 1, 0.0f,
                            b->C(), 1);
              else
                cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, b->B(), N, b->A(), 1, 0.0f,
                            b->C(), 1);
            }};
  }
  return {core + " sgemm", "row-major", [b, M, N, K, b_transposed] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, M, N,
                        K, 1.0f, b->A(), K, b->B(), b_transposed ? K : N, 0.0f, b->C(), N);
          }};
}

}  // namespace

std::optional<LibraryOp> library_op(const schedule_space::Task& task, int threads) {
  const auto& a = task.args();
  if (a.get("dtype") != "float32") return std::nullopt;
  set_library_threads(threads);
  const std::string& name = task.template_name();
  try {
    // Winograd against the library's direct convolution of the same shape: what it replaces.
    if (name == "conv2d" || name == "conv2d_nchwc" || name == "conv2d_winograd_nchwc")
      return conv_op(a, false);
    if (name == "depthwise_conv2d" || name == "depthwise_conv2d_nchwc") return conv_op(a, true);
    if (name == "max_pool2d" || name == "avg_pool2d") return pool_op(a, name == "max_pool2d");
    if (name == "matmul") return gemm_op(a, a.get("layout") == "nt");
    if (name == "dense_bias_relu") return gemm_op(a, true);
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::kUnsupported, "oneDNN refuses " + task.workload_key() + ": " + e.what());
  }
  return std::nullopt;
}

std::optional<LibraryRace> library_race(const schedule_space::Task& task,
                                        const codegen::Kernel& kernel, int threads, int rounds) {
  const std::optional<LibraryOp> op = library_op(task, threads);
  if (!op) return std::nullopt;
  codegen::set_num_threads(threads);
  std::vector<te::HostBuffer> buffers;
  std::vector<void*> args;
  buffers.reserve(kernel.signature().size());
  for (const codegen::ArgSpec& a : kernel.signature()) {
    if (a.dtype != "float32") return std::nullopt;  // library_op takes float32 tasks only
    buffers.emplace_back(a.shape, te::Float(32));
    buffers.back().fill_random(buffers.size());
    args.push_back(buffers.back().data());
  }
  int32_t status = 0;
  try {
    std::vector<std::function<void()>> turns = {[&] { status |= kernel.run(args); }, op->run};
    // Made for one thread: oneDNN fixes a primitive's thread count when it creates it.
    std::optional<LibraryOp> one;
    if (threads > 1) one = library_op(task, 1);
    set_library_threads(threads);
    if (one)
      turns.push_back([&] {
        set_library_threads(1);
        one->run();
        set_library_threads(threads);
      });
    const std::vector<RoundStats> t = time_interleaved(turns, rounds, race_pacing(threads));
    if (status != 0)
      throw Error(ErrorKind::kRun,
                  task.workload_key() + ": the tuned kernel returned " + std::to_string(status));
    if (t.size() > 2 && t[2].median_s < t[1].median_s)
      return LibraryRace{op->library, t[0], t[2], threads, 1};
    return LibraryRace{op->library, t[0], t[1], threads, threads};
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::kUnsupported, "oneDNN refuses " + task.workload_key() + ": " + e.what());
  }
}

}  // namespace ktune::baselines
