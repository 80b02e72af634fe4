#include "schedule_space/templates/nchwc_conv_space.h"

#include <algorithm>

#include "schedule_space/templates/common.h"
#include "support/error.h"

namespace ktune::schedule_space::templates {
namespace {

constexpr int64_t kMaxTileKo = 4;
constexpr int64_t kMaxTileOh = 4;
constexpr int64_t kMaxTileOw = 32;

// The AArch64 register tile (Cortex-A72/A76 class, not timed here: qemu timings say nothing):
// of the (ko, oh, ow) blocks that divide their extents, the most accumulators that fit 32 NEON
// registers with every weight vector of the tile and the input scalar (accumulator_budget);
// among equals, the fewest loads per step (weight vectors + input scalars), then more columns.
// With 16-wide oc blocks (4 vectors) that is 16 accumulators: 1 x 1 x 4 on 56 x 56, 2 x 1 x 2
// on 7 x 14 (where one block would get only 2 columns). x86's pairing below, measured on Zen 4,
// would put 7 columns x 4 vectors = 28 accumulators + 5 operands in 32 registers: LLVM then
// reloads an accumulator from the stack in every step of the innermost loop.
void aarch64_register_blocks(const NchwcConvDims& d, const TargetTraits& target, int64_t& koi,
                             int64_t& ohi, int64_t& owi) {
  int64_t best_acc = 0, best_loads = 0;
  for (int64_t k = 1; k <= std::min(kMaxTileKo, d.kblocks); ++k) {
    if (d.kblocks % k != 0) continue;
    for (int64_t h = 1; h <= std::min(kMaxTileOh, d.oh); ++h) {
      if (d.oh % h != 0) continue;
      for (int64_t w = 1; w <= std::min(kMaxTileOw, d.ow); ++w) {
        if (d.ow % w != 0) continue;
        const int64_t acc = k * d.vectors * h * w, loads = k * d.vectors + h * w;
        if (acc > target.accumulator_budget(k * d.vectors)) continue;
        const bool better =
            acc > best_acc ||
            (acc == best_acc && (loads < best_loads || (loads == best_loads && w > owi)));
        if (!better) continue;
        best_acc = acc, best_loads = loads;
        koi = k, ohi = h, owi = w;
      }
    }
  }
}

}  // namespace

void define_nchwc_conv_space(const NchwcConvDims& d, const NchwcKnobs& k,
                             const TargetTraits& target, ConfigSpace& space) {
  space.define_split("tile_ko",
                     {.extent = d.kblocks, .num_outputs = 2, .max_innermost = kMaxTileKo});
  space.define_split("tile_oh", {.extent = d.oh, .num_outputs = 2, .max_innermost = kMaxTileOh});
  space.define_split("tile_ow", {.extent = d.ow, .num_outputs = 2, .max_innermost = kMaxTileOw});
  space.define_split("tile_ci", {.extent = d.cblocks, .num_outputs = 2});
  space.define_knob("reduce_order", std::vector<int64_t>{0, 1, 2});
  space.define_knob(k.unroll_inner, std::vector<int64_t>{0, 1});
  space.define_knob("unroll_s", std::vector<int64_t>{0, 1});
  define_pad_inline_and_parallel(space, k.pad_inline_knob, k.padded);
  const int64_t vectors = d.vectors;
  space.add_constraint("register tile fits the vector registers",
                       [vectors, target](const EntityView& v) {
                         const int64_t weights = v["tile_ko"].values.back() * vectors;
                         return weights * v["tile_oh"].values.back() * v["tile_ow"].values.back() <=
                                target.accumulator_budget(weights);
                       });
}

// x86: two rows and two oc blocks measured ~1.15x over one block (half the input loads per
// FMA), 2 x 2 x 7 ~3% ahead of 2 x 1 x 14 on 56 x 56 (Zen 4); with few register blocks (AVX2
// with 16-wide oc blocks) columns alone fill them. The inner loop stays rolled: unrolled 16x the
// tile's FMAs it measured ~5% slower (code size), LLVM unrolls it a little.
std::vector<uint64_t> nchwc_conv_fallback_digits(const NchwcConvDims& d, const TargetTraits& target,
                                                 const ConfigSpace& space) {
  int64_t koi = 1, ohi = 1, owi = 1;
  if (target.is_aarch64()) {
    aarch64_register_blocks(d, target, koi, ohi, owi);
  } else {
    const int64_t cap = std::max<int64_t>(1, (target.vector_registers() - 4) / d.vectors);
    const int64_t pair = cap >= 12 ? 2 : 1;
    koi = largest_divisor_at_most(d.kblocks, pair);
    ohi = largest_divisor_at_most(d.oh, pair);
    owi = largest_divisor_at_most(d.ow,
                                  std::min(kMaxTileOw, std::max<int64_t>(1, cap / (koi * ohi))));
  }
  // Digit 0 is value 0 of every int knob (reduce_order, the unrolls, pad_inline, skip_taps).
  std::vector<uint64_t> digits(space.num_knobs(), 0);
  digits[0] = closest_split(space.knob(0), {koi});
  digits[1] = closest_split(space.knob(1), {ohi});
  digits[2] = closest_split(space.knob(2), {owi});
  digits[3] = closest_split(space.knob(3), {d.cblocks});
  const auto par = static_cast<size_t>(space.knob_position("parallel"));
  digits[par] = closest_int(space.knob(par), target.cores > 1 ? 1 : 0);
  return digits;
}

Config nchwc_conv_fallback(const NchwcConvDims& d, const TargetTraits& target,
                           const ConfigSpace& space) {
  return pick_fallback(space, nchwc_conv_fallback_digits(d, target, space));
}

te::IterVar schedule_nchwc_output(te::Stage out, const Config& cfg, const NchwcConvDims& d,
                                  const std::string& tmpl) {
  const auto ks = apply_split(out, out.axis(1), cfg["tile_ko"], d.kblocks);
  const auto ys = apply_split(out, out.axis(2), cfg["tile_oh"], d.oh);
  const auto xs = apply_split(out, out.axis(3), cfg["tile_ow"], d.ow);
  if (ks.size() != 2 || ys.size() != 2 || xs.size() != 2)
    throw Error(ErrorKind::kInstantiation, tmpl + ": tile_ko, tile_oh and tile_ow split in 2");
  const te::IterVar lane = out.axis(4);
  out.reorder({out.axis(0), ks[0], ys[0], xs[0], ks[1], ys[1], xs[1], lane});
  const te::IterVar outer = out.fuse(out.fuse(out.axis(0), ks[0]), ys[0]);
  if (cfg["parallel"].as_int() != 0) out.parallel(outer);
  out.vectorize(lane);
  return xs[0];
}

void order_nchwc_accumulator(te::Stage acc, const te::IterVar& ci, const te::IterVar& r,
                             const te::IterVar& s, const te::IterVar& in,
                             const std::vector<te::IterVar>& innermost, const Config& cfg,
                             const NchwcConvDims& d, const std::string& tmpl) {
  const auto cs = apply_split(acc, ci, cfg["tile_ci"], d.cblocks);
  if (cs.size() != 2) throw Error(ErrorKind::kInstantiation, tmpl + ": tile_ci splits in 2");
  std::vector<te::IterVar> order = {acc.axis(0)};
  switch (cfg["reduce_order"].as_int()) {
    case 0:
      order.insert(order.end(), {cs[0], cs[1], r, s, in});
      break;
    case 1:
      order.insert(order.end(), {cs[0], r, s, cs[1], in});
      break;
    case 2:
      order.insert(order.end(), {cs[0], r, cs[1], s, in});
      break;
    default:
      throw Error(ErrorKind::kInstantiation, tmpl + ": reduce_order is 0, 1 or 2");
  }
  // Oc blocks innermost of the tile: each broadcast input feeds tile_ko FMAs back to back, so
  // it dies at once instead of being kept (or spilled) until the next oc block's pass.
  order.insert(order.end(), {acc.axis(2), acc.axis(3), acc.axis(1)});
  order.insert(order.end(), innermost.begin(), innermost.end());
  acc.reorder(order);
  acc.unroll(acc.axis(1));
  acc.unroll(acc.axis(2));
  acc.unroll(acc.axis(3));
}

}  // namespace ktune::schedule_space::templates
