// The tuned tasks of a model build: each TaskOccurrence's config chosen from the log, its weights
// packed with the fused BatchNormalization and bias folded in, its arguments bound to tensors.
#include <algorithm>
#include <cmath>
#include <map>

#include "deploy/model_ops.h"
#include "deploy/model_planner.h"
#include "deploy/model_pool.h"
#include "schedule_space/templates/winograd.h"
#include "te/lower.h"

namespace ktune::deploy {

Planner::Affine Planner::fused_affine(const frontend::Node& anchor,
                                      const std::vector<size_t>& fused, int64_t channels,
                                      const std::string& anchor_bias) {
  Affine a;
  a.scale.assign(static_cast<size_t>(channels), 1.0f);
  a.shift.assign(static_cast<size_t>(channels), 0.0f);
  if (!anchor_bias.empty()) {
    const auto& b = constant(anchor, anchor_bias);
    if (static_cast<int64_t>(b.f32.size()) != channels)
      throw unsupported(anchor, "a bias of another channel count");
    a.shift = b.f32;
    // A Gemm's C enters as beta C.
    const float beta = anchor.op == "Gemm" ? static_cast<float>(anchor.float_or("beta", 1.0)) : 1;
    if (beta != 1.0f)
      for (float& v : a.shift) v *= beta;
    a.shifted = true;
  }
  std::string chain = anchor.outputs.at(0);
  bool activation = false;  // the activation's nodes (an Add inside gelu_erf) add nothing here
  std::map<std::string, std::string> upsampled;  // a fused Resize's output -> its input
  for (size_t j : fused) {
    const frontend::Node& f = g_.nodes[j];
    // The Resize of an upsampled residual (EpilogueFuser): the kernel reads its input.
    if (!activation && (f.op == "Resize" || f.op == "Upsample")) {
      upsampled[f.outputs.at(0)] = f.inputs.at(0);
      continue;
    }
    activation = activation || (f.op != "BatchNormalization" && f.op != "Add" && f.op != "Max");
    if (!activation && f.op == "BatchNormalization") {
      const auto& gamma = constant(f, f.inputs.at(1)).f32;
      const auto& beta = constant(f, f.inputs.at(2)).f32;
      const auto& mean = constant(f, f.inputs.at(3)).f32;
      const auto& var = constant(f, f.inputs.at(4)).f32;
      const float eps = f.attrs.count("epsilon") ? f.attrs.at("epsilon").floats.at(0) : 1e-5f;
      const size_t n = a.scale.size();
      if (gamma.size() != n || beta.size() != n || mean.size() != n || var.size() != n)
        throw unsupported(f, "parameters of another channel count");
      for (size_t k = 0; k < n; ++k) {
        const float s = gamma[k] / std::sqrt(var[k] + eps);
        a.shift[k] = a.shift[k] * s + beta[k] - mean[k] * s;
        a.scale[k] *= s;
      }
      a.shifted = true;
    } else if (!activation && (f.op == "Add" || f.op == "Max") &&
               (f.inputs.at(0) == chain || f.inputs.at(1) == chain)) {
      const std::string& other = f.inputs[0] == chain ? f.inputs[1] : f.inputs[0];
      if (f.op == "Add" && constants_.count(other)) {
        // A per-channel constant (the fuser checked that it broadcasts along the channel axis),
        // or one value for every channel.
        const auto& c = constant(f, other);
        const bool one = c.f32.size() == 1;
        if (!one && static_cast<int64_t>(c.f32.size()) != channels)
          throw unsupported(f, "a bias of another channel count");
        for (size_t k = 0; k < a.shift.size(); ++k) a.shift[k] += c.f32[one ? 0 : k];
        a.shifted = true;
      } else {
        const auto up = upsampled.find(other);
        a.residual = up == upsampled.end() ? other : up->second;
      }
    }
    // Activations are the template's epilogue; the chain continues through each fused node.
    chain = f.outputs.at(0);
  }
  return a;
}

void Planner::plan_task(const frontend::TaskOccurrence& occ) {
  const frontend::ModelTask& mt = tasks_.tasks[occ.task];
  const frontend::Node& anchor = g_.nodes[occ.node];
  if (mt.status != frontend::TaskStatus::kOk || !mt.tunable)
    throw unsupported(anchor, "its task " + mt.key() + " is " + frontend::to_string(mt.status) +
                                  (mt.refused.empty() ? "" : " (" + mt.refused + ")"));
  const schedule_space::Task& task = *mt.tunable;
  const std::string& layer = occ.layer;
  std::string out_name = anchor.outputs.at(0);
  if (!occ.fused.empty()) out_name = g_.nodes[occ.fused.back()].outputs.at(0);
  // A pool whose input is channel-blocked runs blocked too (a generated kernel): converting to
  // NCHW and back around it would cost more than the pool.
  const std::string& tmpl = task.template_name();
  if ((tmpl == "max_pool2d" || tmpl == "avg_pool2d") && occ.fused.empty()) {
    auto cur = current_.find(anchor.inputs.at(0));
    if (cur != current_.end() && plan_.tensors[cur->second].block > 0) {
      const int64_t block = plan_.tensors[cur->second].block;
      BlockedPool pool{tmpl == "max_pool2d",
                       plan_.tensors[cur->second].shape,
                       block,
                       task.args().get_int("R"),
                       task.args().get_int("S"),
                       task.args().get_int("stride"),
                       task.args().get_int("pad")};
      PlanStep s;
      s.layer = layer;
      s.kind = "pool";
      s.symbol = symbol(pool.max ? "max_pool_nchwc" : "avg_pool_nchwc");
      s.flop = mt.flop;
      s.task = task;
      s.func = pool_blocked(s.symbol, pool);
      s.args = {cur->second, define(out_name, block)};
      plan_.steps.push_back(std::move(s));
      return;
    }
  }
  PlanStep s;
  s.layer = layer;
  s.kind = "task";
  s.flop = mt.flop;
  const ChoiceOptions how;
  s.task = task;
  if (options_.verdict_only) {
    // No log: whether the model builds does not depend on which config a task runs.
    s.choice = ConfigChoice{};
    s.choice->config = task.fallback_config();
  } else {
    s.choice = choose_config(options_.history, Workload{target_, task}, how);
  }
  // Another algorithm for the same layers (Winograd for a 3x3 conv) runs when its best record
  // measured faster than the task's (an untuned alternative never replaces the task).
  for (size_t a :
       options_.verdict_only ? std::vector<size_t>{} : tasks_.alternatives_of(occ.task)) {
    const frontend::ModelTask& alt = tasks_.tasks[a];
    if (!alt.tunable) continue;
    ConfigChoice c = choose_config(options_.history, Workload{target_, *alt.tunable}, how);
    if (c.source != ConfigChoice::Source::kTuned) continue;
    if (s.choice->source != ConfigChoice::Source::kTuned ||
        c.best->cost() < s.choice->best->cost()) {
      s.task = *alt.tunable;
      s.choice = std::move(c);
    }
  }
  const schedule_space::Task& run = *s.task;
  s.symbol = symbol(run.template_name());
  if (options_.require_tuned && s.choice->source != ConfigChoice::Source::kTuned)
    throw Error(ErrorKind::kNotFound, "node '" + anchor.name + "': " + run.workload_key() +
                                          " is not tuned (" + s.choice->untuned_reason + ")");
  const schedule_space::Instantiated inst = run.instantiate(s.choice->config);
  s.func = te::lower(inst.schedule, inst.args, s.symbol);

  if (tmpl == "conv2d_nchwc_u8s8s32" || tmpl == "depthwise_conv2d_nchwc_u8s8s32" ||
      tmpl == "matmul_u8s8s32")
    bind_quantized(s, anchor, inst.args);
  else if (tmpl == "conv2d_nchwc" || tmpl == "depthwise_conv2d_nchwc")
    bind_conv(s, anchor, occ, out_name, inst.args);
  else if (tmpl == "matmul" || tmpl == "dense_bias_relu" || tmpl == "batch_matmul")
    bind_gemm(s, anchor, occ, out_name, inst.args);
  else if (tmpl == "max_pool2d" || tmpl == "avg_pool2d")
    s.args = {form(anchor.inputs.at(0), 0), define(out_name, 0)};
  else
    throw unsupported(anchor, "template " + tmpl + " is not built into models yet");
  plan_.steps.push_back(std::move(s));
}

void Planner::bind_conv(PlanStep& s, const frontend::Node& conv,
                        const frontend::TaskOccurrence& occ, const std::string& out_name,
                        const std::vector<te::Tensor>& args) {
  const bool depthwise = s.task->template_name() == "depthwise_conv2d_nchwc";
  const bool winograd = s.task->template_name() == "conv2d_winograd_nchwc";
  const auto& w = constant(conv, conv.inputs.at(1));
  const int64_t K = w.shape.at(0), C = depthwise ? K : w.shape.at(1), R = w.shape.at(2),
                S = w.shape.at(3);
  const Affine affine =
      fused_affine(conv, occ.fused, K, conv.inputs.size() > 2 ? conv.inputs[2] : "");
  const std::vector<float>& scale = affine.scale;
  const std::vector<float>& shift = affine.shift;
  const std::string& residual = affine.residual;
  const int64_t icb =
      depthwise ? s.task->args().get_int("block") : s.task->args().get_int("ic_block");
  const int64_t ocb = depthwise ? icb : s.task->args().get_int("oc_block");
  const int64_t kb = (K + ocb - 1) / ocb, cb = (C + icb - 1) / icb;
  std::vector<float> packed;
  if (winograd) {
    // U = G g G^T per channel pair, of the weights with the batch norm's scale folded in.
    std::vector<float> folded(w.f32.begin(), w.f32.end());
    for (int64_t k = 0; k < K; ++k)
      for (size_t i = 0; i < static_cast<size_t>(C * R * S); ++i)
        folded[static_cast<size_t>(k * C * R * S) + i] *= scale[static_cast<size_t>(k)];
    packed = schedule_space::templates::winograd_transform_weights(
        folded.data(), K, C, s.task->args().get_int("m"), icb, ocb);
  } else if (depthwise) {
    // [C/b][R][S][b]
    packed.assign(static_cast<size_t>(cb * R * S * icb), 0.0f);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t q = 0; q < S; ++q)
          packed[static_cast<size_t>(((c / icb * R + r) * S + q) * icb + c % icb)] =
              w.f32[static_cast<size_t>((c * R + r) * S + q)] * scale[static_cast<size_t>(c)];
  } else {
    // [K/ocb][C/icb][R][S][icb][ocb]
    packed.assign(static_cast<size_t>(kb * cb * R * S * icb * ocb), 0.0f);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t q = 0; q < S; ++q)
            packed[static_cast<size_t>(
                ((((k / ocb * cb + c / icb) * R + r) * S + q) * icb + c % icb) * ocb + k % ocb)] =
                w.f32[static_cast<size_t>(((k * C + c) * R + r) * S + q)] *
                scale[static_cast<size_t>(k)];
  }
  std::vector<float> bias(static_cast<size_t>(kb * ocb), 0.0f);
  std::copy(shift.begin(), shift.end(), bias.begin());
  const bool has_bias_shift = affine.shifted;
  for (const te::Tensor& a : args) {
    const std::string& n = a.name();
    if (n == "I")
      s.args.push_back(form(conv.inputs.at(0), icb));
    else if (n == "W")
      s.args.push_back(weight(conv.inputs.at(1) + "@packed", a.shape(), packed));
    else if (n == "U")
      s.args.push_back(weight(conv.inputs.at(1) + "@winograd", a.shape(), packed));
    else if (n == "bias")
      s.args.push_back(weight(conv.name + "@bias", a.shape(), bias));
    else if (n == "residual")
      s.args.push_back(form(residual, ocb));
    else if (&a == &args.back())
      s.args.push_back(define(out_name, ocb));
    else
      throw unsupported(conv, "kernel argument '" + n + "' has no binding");
  }
  // A folded BN or a conv bias needs the kernel's bias argument; without it the shift is lost.
  const bool kernel_has_bias =
      std::any_of(args.begin(), args.end(), [](const te::Tensor& a) { return a.name() == "bias"; });
  if (has_bias_shift && !kernel_has_bias)
    throw unsupported(conv, "a bias without a fused bias epilogue");
}

void Planner::bind_gemm(PlanStep& s, const frontend::Node& gemm,
                        const frontend::TaskOccurrence& occ, const std::string& out_name,
                        const std::vector<te::Tensor>& args) {
  for (size_t j : occ.fused)
    if (g_.nodes[j].op == "BatchNormalization")
      throw unsupported(gemm, "BatchNormalization after a matrix product");
  const int64_t columns = known_shape(gemm.outputs.at(0)).back();
  const Affine affine = fused_affine(
      gemm, occ.fused, columns, gemm.op == "Gemm" && gemm.inputs.size() > 2 ? gemm.inputs[2] : "");
  const std::string& residual = affine.residual;
  // Gemm's alpha scales the product: folded into constant weights (beta into the bias,
  // fused_affine).
  const float alpha = gemm.op == "Gemm" ? static_cast<float>(gemm.float_or("alpha", 1.0)) : 1.0f;
  if (alpha != 1.0f && !constants_.count(gemm.inputs.at(1)))
    throw unsupported(gemm, "alpha other than 1 with a B that is no constant");
  for (const te::Tensor& a : args) {
    const std::string& n = a.name();
    const bool first = &a == &args.front();
    if (first && gemm.op == "Gemm" && gemm.int_or("transA", 0) != 0) {
      // A as [K, M]: transposed into [M, K] by a generated kernel before the product.
      const std::vector<int64_t> shape = known_shape(gemm.inputs.at(0));
      PlanTensor t{gemm.inputs[0] + "@T", {shape.at(1), shape.at(0)}};
      const int64_t from = form(gemm.inputs[0], 0), to = add(t);
      PlanStep step;
      step.layer = gemm.name + " transA";
      step.kind = "elementwise";
      step.symbol = symbol("transpose");
      step.func = transpose(step.symbol, shape, {1, 0});
      step.args = {from, to};
      plan_.steps.push_back(std::move(step));
      s.args.push_back(to);
    } else if (first) {
      // a_softmax: the scores, whose softmax the kernel computes as it reads them.
      s.args.push_back(form(occ.first_input.empty() ? gemm.inputs.at(0) : occ.first_input, 0));
    } else if (&a == &args.back()) {
      s.args.push_back(define(out_name, 0));
    } else if (n == "bias") {
      if (static_cast<int64_t>(affine.shift.size()) != a.num_elements())
        throw unsupported(gemm, "a bias that is not one value per column");
      s.args.push_back(weight(gemm.name + "@bias", a.shape(), affine.shift));
    } else if (n == "residual") {
      s.args.push_back(form(residual, 0));
    } else if (&a == &args[1]) {
      if (constants_.count(gemm.inputs.at(1))) {
        const auto& b = constant(gemm, gemm.inputs.at(1));
        if (product(b.shape) != a.num_elements())
          throw unsupported(gemm, "weights of an unexpected shape");
        std::vector<float> scaled = b.f32;
        if (alpha != 1.0f)
          for (float& v : scaled) v *= alpha;
        s.args.push_back(
            weight(gemm.inputs.at(1) + (alpha != 1.0f ? "@alpha" : ""), a.shape(), scaled));
      } else {
        s.args.push_back(form(gemm.inputs.at(1), 0));
      }
    } else {
      throw unsupported(gemm, "kernel argument '" + n + "' has no binding");
    }
  }
  const bool kernel_has_bias =
      std::any_of(args.begin(), args.end(), [](const te::Tensor& a) { return a.name() == "bias"; });
  if (affine.shifted && !kernel_has_bias)
    throw unsupported(gemm, "a bias without a fused bias epilogue");
}

int64_t Planner::conv_data_block(const std::string& tensor) const {
  int64_t block = 0;
  for (const frontend::TaskOccurrence& occ : tasks_.occurrences) {
    const frontend::Node& anchor = g_.nodes[occ.node];
    if (anchor.op != "Conv" || anchor.inputs.empty() || anchor.inputs[0] != tensor) continue;
    const auto& task = tasks_.tasks[occ.task].tunable;
    if (!task) return 0;
    const std::string& tmpl = task->template_name();
    int64_t b = 0;
    if (tmpl == "depthwise_conv2d_nchwc")
      b = task->args().get_int("block");
    else if (tmpl == "conv2d_nchwc")
      b = task->args().get_int("ic_block");
    if (b == 0 || (block != 0 && b != block)) return 0;
    block = b;
  }
  return block;
}

}  // namespace ktune::deploy
