// The epilogue steps the templates fuse after their reduction: names, arguments, expressions.
#include "schedule_space/templates/epilogue.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr const char* kNone = "none";

// Activation names, in the order the choices list them.
const std::vector<std::pair<Activation, std::string>>& activation_names() {
  static const std::vector<std::pair<Activation, std::string>> names = {
      {Activation::kRelu, "relu"},
      {Activation::kRelu6, "relu6"},
      {Activation::kClip, "clip"},
      {Activation::kHardSwish, "hardswish"},
      {Activation::kSilu, "silu"},
      {Activation::kGelu, "gelu"},
      {Activation::kGeluErf, "gelu_erf"},
      {Activation::kSigmoid, "sigmoid"},
      {Activation::kLeakyRelu, "leaky_relu"},
      {Activation::kHardSigmoid, "hardsigmoid"}};
  return names;
}

// The activations' parameters: the argument that sets each, and where Epilogue keeps it (its
// default there is the argument's).
struct Param {
  Activation activation;
  std::string name;
  double Epilogue::*field;
  std::string doc;
};

const std::vector<Param>& params() {
  static const std::vector<Param> all = {
      {Activation::kClip, "clip_min", &Epilogue::clip_min,
       "lower bound of the clip step (a number, -inf: none)"},
      {Activation::kClip, "clip_max", &Epilogue::clip_max,
       "upper bound of the clip step (a number, inf: none)"},
      {Activation::kLeakyRelu, "leaky_alpha", &Epilogue::leaky_alpha,
       "slope of the leaky_relu step below 0"},
      {Activation::kHardSigmoid, "hardsigmoid_alpha", &Epilogue::hardsigmoid_alpha,
       "slope of the hardsigmoid step"},
      {Activation::kHardSigmoid, "hardsigmoid_beta", &Epilogue::hardsigmoid_beta,
       "value of the hardsigmoid step at 0"}};
  return all;
}

std::string name_of(Activation activation) {
  for (const auto& [a, n] : activation_names())
    if (a == activation) return n;
  return kNone;
}

std::string activation_list() {
  std::string text;
  for (const auto& [a, n] : activation_names()) text += (text.empty() ? "" : ", ") + n;
  return text;
}

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

// A bound's value: a decimal number, "inf" or "-inf"; nullopt for anything else.
std::optional<double> parse_bound(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || std::isnan(v)) return std::nullopt;
  return v;
}

std::string number_text(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  if (ec != std::errc()) invalid("an activation parameter cannot be printed");
  return std::string(buf, ptr);
}

// A parameter's value from its text; throws naming the argument when it is not a number (only
// clip's bounds may be infinite: no bound).
double param_value(const Param& p, const std::string& text) {
  const auto v = parse_bound(text);
  if (!v || (p.activation != Activation::kClip && !std::isfinite(*v)))
    invalid("argument " + p.name + "=" + text + " is not a" +
            (p.activation == Activation::kClip ? "" : " finite") + " number");
  return *v;
}

}  // namespace

// te has no erf (LLVM has no intrinsic for it, and a libm call would neither vectorize nor be
// resolved on every device); Abramowitz & Stegun 7.1.26 uses exp, which both have.
te::Expr erf_expr(const te::Expr& x, te::DataType dt) {
  auto c = [dt](double v) { return te::cast(dt, te::Expr(v)); };
  const te::Expr ax = te::abs(x);
  const te::Expr t = c(1.0) / (c(1.0) + c(0.3275911) * ax);
  const te::Expr poly =
      t *
      (c(0.254829592) +
       t * (c(-0.284496736) + t * (c(1.421413741) + t * (c(-1.453152027) + t * c(1.061405429)))));
  const te::Expr y = c(1.0) - poly * te::exp(-(ax * ax));
  return te::select(x < c(0.0), -y, y);
}

std::string Epilogue::name() const {
  if (empty()) return kNone;
  std::vector<std::string> steps;
  if (bias) steps.push_back("bias");
  if (residual) steps.push_back(residual_max ? "max" : "add");
  if (activation != Activation::kNone) steps.push_back(name_of(activation));
  std::string text;
  for (const auto& s : steps) text += (text.empty() ? "" : "_") + s;
  return text;
}

double Epilogue::flop() const {
  double f = (bias ? 1 : 0) + (residual ? 1 : 0);
  switch (activation) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      f += 1;
      break;
    case Activation::kRelu6:
    case Activation::kClip:
      f += 2;
      break;
    case Activation::kHardSwish:
      f += 5;
      break;
    case Activation::kSilu:
      f += 4;
      break;
    case Activation::kGelu:
      f += 8;
      break;
    case Activation::kGeluErf:
      f += 20;
      break;
    case Activation::kSigmoid:
      f += 3;
      break;
    case Activation::kLeakyRelu:
      f += 2;
      break;
    case Activation::kHardSigmoid:
      f += 4;
      break;
  }
  return f;
}

te::Expr Epilogue::apply(te::Expr v, const te::Expr& bias_value, const te::Expr& residual_value,
                         te::DataType dt) const {
  auto c = [dt](double x) { return te::cast(dt, te::Expr(x)); };
  if (bias) v = v + bias_value;
  if (residual) v = residual_max ? te::max(v, residual_value) : v + residual_value;
  switch (activation) {
    case Activation::kNone:
      return v;
    case Activation::kRelu:
      return te::max(v, c(0.0));
    case Activation::kRelu6:
      return te::min(te::max(v, c(0.0)), c(6.0));
    case Activation::kClip:
      if (std::isfinite(clip_min)) v = te::max(v, c(clip_min));
      if (std::isfinite(clip_max)) v = te::min(v, c(clip_max));
      return v;
    case Activation::kHardSwish:
      // A multiplication by 1/6, not a division: within an ulp, and several times cheaper.
      return v * te::min(te::max(v + c(3.0), c(0.0)), c(6.0)) * c(1.0 / 6.0);
    case Activation::kSilu:
      return v * te::sigmoid(v);
    case Activation::kGelu: {
      // The form BERT and GPT-2 use; kept exactly as the matmul templates first wrote it (the
      // reference of tuned bias_gelu records).
      const te::Expr inner = c(0.7978845608028654) * (v + c(0.044715) * v * v * v);
      return c(0.5) * v * (c(1.0) + te::tanh(inner));
    }
    case Activation::kGeluErf:
      return c(0.5) * v * (c(1.0) + erf_expr(v * c(0.7071067811865476), dt));
    case Activation::kSigmoid:
      return te::sigmoid(v);
    case Activation::kLeakyRelu:
      return te::select(v < c(0.0), v * c(leaky_alpha), v);
    case Activation::kHardSigmoid:
      return te::min(te::max(v * c(hardsigmoid_alpha) + c(hardsigmoid_beta), c(0.0)), c(1.0));
  }
  return v;
}

Epilogue parse_epilogue(const std::string& name) {
  Epilogue e;
  if (name == kNone) return e;
  if (name.empty() || name.front() == '_' || name.back() == '_' ||
      name.find("__") != std::string::npos)
    invalid("epilogue '" + name + "': steps are joined by single '_'");
  std::string rest = name;
  auto take = [&rest](const std::string& step) {
    if (rest == step) {
      rest.clear();
      return true;
    }
    if (rest.rfind(step + "_", 0) == 0) {
      rest = rest.substr(step.size() + 1);
      return true;
    }
    return false;
  };
  e.bias = take("bias");
  e.residual = take("add");
  if (!e.residual) e.residual = e.residual_max = take("max");
  if (!rest.empty()) {
    for (const auto& [a, n] : activation_names())
      if (rest == n) e.activation = a;
    if (e.activation == Activation::kNone)
      invalid("epilogue '" + name + "': steps are bias, add or max, then one of " +
              activation_list() + ", joined by '_'");
  }
  if (e.empty()) invalid("epilogue '" + name + "' has no step");
  return e;
}

std::vector<std::string> epilogue_choices(const EpilogueOffer& offer) {
  std::vector<std::string> out;
  if (offer.none) out.push_back(kNone);
  std::vector<Activation> activations = {Activation::kNone};
  for (const auto& [a, n] : activation_names()) activations.push_back(a);
  for (bool bias : {true, false}) {
    if (!bias && !offer.none) continue;
    for (int residual : {0, 1, 2})  // none, add, max
      for (Activation a : activations) {
        const Epilogue e{
            .bias = bias, .residual = residual > 0, .residual_max = residual == 2, .activation = a};
        if (!e.empty()) out.push_back(e.name());
      }
  }
  return out;
}

std::vector<ArgSpec> epilogue_args(const EpilogueOffer& offer) {
  const std::string doc =
      "fused after the reduction, steps joined by '_': bias (" + offer.bias_doc +
      "), add or max (" + offer.residual_doc + ": added, or the larger kept), then one of " +
      activation_list() +
      " (clip: clip_min..clip_max; gelu: the tanh form; leaky_relu: leaky_alpha; hardsigmoid: "
      "hardsigmoid_alpha, hardsigmoid_beta)" +
      (offer.none ? "; or none" : "");
  std::vector<ArgSpec> args = {{.name = "epilogue",
                                .type = ArgSpec::Type::kString,
                                .default_value = offer.default_value,
                                .doc = doc,
                                .choices = epilogue_choices(offer),
                                .key_omits_default = true}};
  const Epilogue defaults;
  for (const Param& p : params())
    args.push_back({.name = p.name,
                    .type = ArgSpec::Type::kString,
                    .default_value = number_text(defaults.*p.field),
                    .doc = p.doc,
                    .key_omits_default = true});
  return args;
}

const std::vector<std::string>& activation_arg_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Param& p : params()) out.push_back(p.name);
    return out;
  }();
  return names;
}

Epilogue epilogue_of(const std::string& steps, const std::map<std::string, std::string>& args) {
  Epilogue e = parse_epilogue(steps.empty() ? kNone : steps);
  for (const Param& p : params())
    if (p.activation == e.activation)
      if (auto it = args.find(p.name); it != args.end()) e.*p.field = param_value(p, it->second);
  return e;
}

Epilogue epilogue_of(const WorkloadArgs& a) { return epilogue_of(a.get("epilogue"), a.to_map()); }

std::map<std::string, std::string> activation_args(const Epilogue& e) {
  const Epilogue defaults;
  std::map<std::string, std::string> out;
  for (const Param& p : params())
    if (p.activation == e.activation && e.*p.field != defaults.*p.field)
      out[p.name] = number_text(e.*p.field);
  return out;
}

void resolve_epilogue(WorkloadArgs& a) {
  for (const Param& p : params()) a.set_string(p.name, number_text(param_value(p, a.get(p.name))));
}

void check_epilogue(const std::string& template_name, const WorkloadArgs& a) {
  const Epilogue e = parse_epilogue(a.get("epilogue"));
  const Epilogue defaults;
  for (const Param& p : params()) {
    double v = 0;
    try {
      v = param_value(p, a.get(p.name));
    } catch (const Error& bad) {
      invalid(template_name + ": " + bad.what());
    }
    if (p.activation != e.activation && v != defaults.*p.field)
      invalid(template_name + ": " + p.name + " applies to an epilogue ending in " +
              name_of(p.activation) + ", not to epilogue=" + e.name());
  }
  const Epilogue given = epilogue_of(a);
  if (given.clip_min > given.clip_max)
    invalid(template_name + ": clip_min=" + a.get("clip_min") +
            " is above clip_max=" + a.get("clip_max"));
}

void EpilogueInputs::append_to(std::vector<te::Tensor>& args) const {
  if (bias.defined()) args.push_back(bias);
  if (residual.defined()) args.push_back(residual);
}

EpilogueInputs epilogue_inputs(const Epilogue& e, const std::vector<int64_t>& bias_shape,
                               const std::vector<int64_t>& residual_shape, te::DataType dt) {
  EpilogueInputs in;
  if (e.bias) in.bias = te::placeholder(bias_shape, dt, "bias");
  if (e.residual) in.residual = te::placeholder(residual_shape, dt, "residual");
  return in;
}

}  // namespace ktune::schedule_space::templates
