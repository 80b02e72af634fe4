// Implements the channel-blocked depthwise space: knobs, fallback and schedule (depthwise_space.h).
#include "schedule_space/templates/depthwise_space.h"

#include <vector>

#include "schedule_space/templates/common.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr int64_t kMaxTileOh = 4;
constexpr int64_t kMaxTileOw = 16;

}  // namespace

void define_depthwise_space(int64_t oh, int64_t ow, int64_t vectors, const DepthwiseKnobs& k,
                            const TargetTraits& target, ConfigSpace& space) {
  space.define_split("tile_oh", {.extent = oh, .num_outputs = 2, .max_innermost = kMaxTileOh});
  space.define_split("tile_ow", {.extent = ow, .num_outputs = 2, .max_innermost = kMaxTileOw});
  space.define_knob("unroll_s", std::vector<int64_t>{0, 1});
  define_pad_inline_and_parallel(space, k.pad_inline_knob, k.padded);
  space.define_knob("unroll_r", std::vector<int64_t>{0, 1});
  space.set_legacy_value("unroll_r", 0);  // logged before the knob
  space.add_constraint(
      "register tile fits the vector registers", [vectors, target](const EntityView& v) {
        const int64_t acc = v["tile_oh"].values.back() * v["tile_ow"].values.back() * vectors;
        return acc <= target.accumulator_budget(2 * vectors);
      });
}

namespace {

// Fallback digits: every knob at its first candidate until `set`.
struct Digits {
  const ConfigSpace& space;
  std::vector<uint64_t> d = std::vector<uint64_t>(space.num_knobs(), 0);
  // Sets knob `name` (when the space has it) to the candidate closest to v.
  void set(const char* name, int64_t v) {
    const int64_t at = space.knob_position(name);
    if (at >= 0) d[static_cast<size_t>(at)] = closest_int(space.knob(static_cast<size_t>(at)), v);
  }
};

}  // namespace

Config depthwise_dot_fallback(int64_t oh, int64_t ow, const TargetTraits& target,
                              const ConfigSpace& space) {
  Digits g{space};
  const int64_t rows = largest_divisor_at_most(oh, kMaxTileOh);
  g.d[0] = closest_split(space.knob(0), {rows});
  g.d[1] = closest_split(space.knob(1), {largest_divisor_at_most(ow, 16 / rows)});
  g.set("unroll_s", 0);
  g.set("parallel", target.cores > 1 ? 1 : 0);
  g.set("unroll_r", 1);
  g.set("dot_taps", 1);
  return pick_fallback(space, g.d);
}

Config depthwise_fallback(int64_t ow, const TargetTraits& target, const ConfigSpace& space) {
  Digits g{space};
  g.d[0] = closest_split(space.knob(0), {1});
  g.d[1] = closest_split(space.knob(1), {largest_divisor_at_most(ow, 8)});
  g.set("unroll_s", 1);
  g.set("pad_inline", 1);
  g.set("parallel", target.cores > 1 ? 1 : 0);
  g.set("skip_taps", 1);  // only with pad_inline 1 and padding
  return pick_fallback(space, g.d);
}

void schedule_depthwise(te::Schedule& s, const te::Tensor& out_t, const te::Tensor& acc_t,
                        int64_t oh, int64_t ow, const Config& cfg, const std::string& tmpl,
                        const te::TensorIntrin* row_dot) {
  te::Stage out = s[out_t];
  const auto ys = apply_split(out, out.axis(2), cfg["tile_oh"], oh);
  const auto xs = apply_split(out, out.axis(3), cfg["tile_ow"], ow);
  if (ys.size() != 2 || xs.size() != 2)
    throw Error(ErrorKind::kInstantiation, tmpl + ": tile_oh and tile_ow split in 2");
  const te::IterVar lane = out.axis(4);
  out.reorder({out.axis(0), out.axis(1), ys[0], xs[0], ys[1], xs[1], lane});
  const te::IterVar outer = out.fuse(out.fuse(out.axis(0), out.axis(1)), ys[0]);
  if (cfg["parallel"].as_int() != 0) out.parallel(outer);
  out.vectorize(lane);

  te::Stage acc = s[acc_t];
  acc.compute_at(out, xs[0]);
  const te::IterVar r = acc.reduce_axis(0), sx = acc.reduce_axis(1);
  if (row_dot) {
    acc.reorder({acc.axis(0), acc.axis(1), r, acc.axis(2), acc.axis(3), acc.axis(4), sx});
    acc.tensorize(acc.axis(4), *row_dot);
  } else {
    acc.reorder({acc.axis(0), acc.axis(1), r, sx, acc.axis(2), acc.axis(3), acc.axis(4)});
    acc.vectorize(acc.axis(4));
    unroll_if(acc, sx, cfg["unroll_s"].as_int() != 0);
  }
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
  if (const Entity* e = cfg.find("unroll_r")) unroll_if(acc, r, e->as_int() != 0);
}

}  // namespace ktune::schedule_space::templates
