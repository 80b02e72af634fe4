// Task: creation from the registry, checked instantiation of configs, the reference schedule.
#include "schedule_space/task.h"

#include <cstdint>
#include <random>

#include "support/error.h"

namespace ktune::schedule_space {
namespace {

// The largest tensor a workload may have: 2^48 bytes (256 TiB) is far above any device's memory
// and far below where the 64-bit index and byte arithmetic of a kernel and its header overflow.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;
// The most FLOPs one run may take: about 2^63.
constexpr double kMaxFlop = 9.2e18;

// Refuses a workload whose tensors or FLOPs no kernel could handle, before its space is defined.
void check_sizes(const TemplateDef& def, const WorkloadArgs& args, const std::string& key) {
  const ComputeDef c = def.compute(args);
  for (const te::Tensor& t : c.args) {
    uint64_t bytes =
        (static_cast<uint64_t>(t.dtype().bits) * static_cast<uint64_t>(t.dtype().lanes) + 7) / 8;
    for (int64_t extent : t.shape()) {
      if (extent < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(extent), &bytes) ||
          bytes > kMaxTensorBytes)
        throw Error(ErrorKind::kInvalidArgument,
                    key + ": tensor " + t.name() + " would take more than 2^48 bytes (256 TiB)");
    }
  }
  const double flop = def.flop(args);
  if (!(flop >= 0) || flop > kMaxFlop)
    throw Error(ErrorKind::kInvalidArgument,
                key + ": one run would take more than 2^63 floating-point operations");
}

}  // namespace

Task Task::create(const std::string& template_name, const std::map<std::string, std::string>& args,
                  const TargetTraits& target) {
  Task t;
  t.def_ = TemplateRegistry::global().get(template_name);
  t.args_ = WorkloadArgs(template_name, t.def_->args, args);
  if (t.def_->resolve) t.def_->resolve(t.args_);
  if (t.def_->check) t.def_->check(t.args_);
  t.target_ = target;
  if (t.target_.vector_bits <= 0 || t.target_.cores <= 0)
    throw Error(ErrorKind::kInvalidArgument, "target traits need positive vector_bits and cores");
  t.key_ = t.args_.key(template_name);
  check_sizes(*t.def_, t.args_, t.key_);
  t.flop_ = t.def_->flop(t.args_);
  auto space = std::make_shared<ConfigSpace>(template_name);
  t.def_->define(t.args_, t.target_, *space);
  t.space_ = std::move(space);
  if (t.def_->fallback) {
    t.fallback_ = t.def_->fallback(t.args_, t.target_, *t.space_);
  } else {
    std::mt19937_64 rng(0);
    const auto pick = t.space_->sample(1, rng);
    if (pick.empty())
      throw Error(ErrorKind::kInvalidArgument, t.key_ + ": the config space has no valid config");
    t.fallback_ = t.space_->get(pick[0]);
  }
  return t;
}

Task Task::with_constraint(std::string name,
                           std::function<bool(const EntityView&)> predicate) const {
  Task t = *this;
  auto space = std::make_shared<ConfigSpace>(*space_);
  space->add_constraint(std::move(name), std::move(predicate));
  t.space_ = std::move(space);
  return t;
}

Instantiated Task::instantiate(const Config& given) const {
  const Config config =
      space_->complete(given);  // a record older than a knob means its legacy value
  const std::string& name = def_->name;
  if (!config.template_name().empty() && config.template_name() != name)
    throw Error(ErrorKind::kInstantiation, "config of template '" + config.template_name() +
                                               "' given to a task of template '" + name + "'");
  for (size_t i = 0; i < space_->num_knobs(); ++i) {
    const Knob& k = space_->knob(i);
    const Entity* e = config.find(k.name());
    if (!e)
      throw Error(ErrorKind::kInstantiation, key_ + ": config has no knob '" + k.name() + "'");
    if (e->kind != k.kind())
      throw Error(ErrorKind::kInstantiation, key_ + ": config knob '" + k.name() + "' is of kind " +
                                                 std::string(to_string(e->kind)) + ", expected " +
                                                 std::string(to_string(k.kind())));
  }
  if (config.entities().size() != space_->num_knobs()) {
    for (const auto& e : config.entities())
      if (!space_->find_knob(e.name))
        throw Error(ErrorKind::kInstantiation,
                    key_ + ": config has knob '" + e.name + "' unknown to template " + name);
  }
  const std::string rejected = space_->rejecting_constraint(config);
  if (!rejected.empty())
    throw Error(ErrorKind::kInstantiation,
                key_ + ": config violates constraint '" + rejected + "'");
  try {
    return def_->apply(args_, target_, config);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInstantiation) throw;
    throw Error(ErrorKind::kInstantiation, key_ + ": config cannot be scheduled: " + e.what());
  }
}

Instantiated Task::reference() const {
  ComputeDef c = def_->compute(args_);
  return {te::create_schedule(c.outputs), std::move(c.args)};
}

}  // namespace ktune::schedule_space
