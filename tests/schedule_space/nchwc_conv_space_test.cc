// Pins the spaces of conv2d_nchwc and conv2d_nchwc_u8s8s32, which share one definition
// (templates/nchwc_conv_space), and of depthwise_conv2d_nchwc (templates/depthwise_space): per
// workload and target the knobs, the space size, which configs
// are valid (in index order), the fallback, and the lowered IR of the fallback and of sampled
// configs. Logged records name configs by index and knob values, so any change here would make
// them build different kernels. The expected values are hashes of what the templates gave before
// they shared the definition, except that the one-core entries' spaces gained parallel = 1 when
// no space depended on a device's cores any more (their records' knob values still say which
// kernel; db check names those whose index moved); a failure prints the values the code gives
// now.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "schedule_space/task.h"
#include "te/ir_printer.h"
#include "te/lower.h"

namespace ktune::schedule_space {
namespace {

// FNV-1a 64: a stable digest of a text.
uint64_t digest(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

struct Pinned {
  const char* tmpl;
  std::map<std::string, std::string> args;
  const char* target;  // a key; the triple is its -mtriple
  int vector_bits, cores;
  uint64_t size, valid_digest, fallback_digest, ir_digest;
};

const char* const kZen4 = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
const char* const kV3 = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3";
const char* const kA72 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";

std::string triple_of(const std::string& key) {
  const size_t at = key.find("-mtriple=") + 9;
  return key.substr(at, key.find(' ', at) - at);
}

// Which of the space's first 200000 indices are valid, the knob names and sizes.
uint64_t valid_digest(const ConfigSpace& space) {
  std::string text;
  for (size_t k = 0; k < space.num_knobs(); ++k)
    text += space.knob(k).name() + "=" + std::to_string(space.knob_sizes()[k]) + ";";
  for (uint64_t i = 0; i < std::min<uint64_t>(space.size(), 200000); ++i)
    text += space.is_valid(i) ? '1' : '0';
  return digest(text);
}

// The lowered IR of the fallback and of four sampled configs (seed 11).
uint64_t ir_digest(const Task& task) {
  std::vector<Config> configs = {task.fallback_config()};
  std::mt19937_64 rng(11);
  for (uint64_t i : task.space().sample(4, rng)) configs.push_back(task.space().get(i));
  uint64_t h = digest("");
  for (const Config& cfg : configs) {
    const Instantiated inst = task.instantiate(cfg);
    h = digest(te::to_string(te::lower(inst.schedule, inst.args, "k")), h);
  }
  return h;
}

const Pinned kPinned[] = {
    {"conv2d_nchwc",
     {{"C", "64"}, {"H", "56"}, {"W", "56"}, {"K", "64"}, {"pad", "1"}},
     kZen4,
     512,
     2,
     18144,
     1676055461445115202ull,
     17939304895495875439ull,
     6495992515808272635ull},
    {"conv2d_nchwc",
     {{"C", "64"}, {"H", "56"}, {"W", "56"}, {"K", "64"}, {"pad", "1"}},
     kV3,
     256,
     1,
     18144,
     143064390127682634ull,
     17023338466687126535ull,
     12468477670551386378ull},
    {"conv2d_nchwc",
     {{"C", "64"}, {"H", "14"}, {"W", "14"}, {"K", "128"}, {"pad", "1"}},
     kA72,
     128,
     4,
     10368,
     5404288884120314017ull,
     3377614837325977279ull,
     7875594303552432440ull},
    {"conv2d_nchwc",
     {{"C", "17"},
      {"H", "9"},
      {"W", "11"},
      {"K", "24"},
      {"stride", "2"},
      {"pad", "2"},
      {"epilogue", "bias_relu"}},
     kZen4,
     512,
     2,
     4608,
     17690105930533585853ull,
     // The fallback (and so the IR) of conv2d_nchwc's strided 3x3 tile on AVX-512: one oc block,
     // two rows, the lane loop unrolled, the padding taps skipped.
     6448182758485872033ull,
     3836142656471135801ull},
    {"conv2d_nchwc",
     {{"C", "8"}, {"H", "7"}, {"W", "7"}, {"K", "40"}, {"R", "1"}, {"S", "1"}},
     kV3,
     256,
     2,
     864,
     5578236340603800033ull,
     12670758770769896293ull,
     11820814455635327912ull},
    {"conv2d_nchwc_u8s8s32",
     {{"C", "64"}, {"H", "28"}, {"W", "28"}, {"K", "64"}, {"pad", "1"}},
     kZen4,
     512,
     2,
     7776,
     50088161238309429ull,
     // The int8 fallback of a padded stride-1 3x3 window on VNNI: two columns, taps skipped.
     10765160420944595200ull,
     2258881260038787738ull},
    {"conv2d_nchwc_u8s8s32",
     {{"C", "12"}, {"H", "9"}, {"W", "7"}, {"K", "20"}, {"stride", "2"}, {"pad", "1"}},
     kV3,
     256,
     1,
     432,
     2974692453992490580ull,
     4191289588225155926ull,
     16801895640296309740ull},
    {"depthwise_conv2d_nchwc",
     {{"C", "32"}, {"H", "56"}, {"W", "56"}, {"pad", "1"}},
     kZen4,
     512,
     2,
     576,
     17514078667186133936ull,
     759108145251251518ull,
     18355501677603671220ull},
    {"depthwise_conv2d_nchwc",
     {{"C", "20"},
      {"H", "9"},
      {"W", "11"},
      {"stride", "2"},
      {"pad", "2"},
      {"epilogue", "bias_relu6"}},
     kV3,
     256,
     1,
     384,
     15717230247447834566ull,
     6027975444881265166ull,
     14454472242673087605ull},
    {"depthwise_conv2d_nchwc",
     {{"C", "24"}, {"H", "14"}, {"W", "14"}, {"pad", "1"}},
     kA72,
     128,
     4,
     384,
     6755307827222201542ull,
     1618880192801825929ull,
     7711843599577744769ull},
};

TEST(NchwcConvSpace, SpacesFallbacksAndKernelsArePinned) {
  for (const Pinned& p : kPinned) {
    const TargetTraits traits =
        make_target_traits(p.target, triple_of(p.target), p.vector_bits, p.cores);
    const Task task = Task::create(p.tmpl, p.args, traits);
    const uint64_t size = task.space().size(), valid = valid_digest(task.space()),
                   fallback = digest(task.fallback_config().to_json_string()), ir = ir_digest(task);
    const std::string what = std::string(p.target) + " " + task.workload_key() + ": now {" +
                             std::to_string(size) + ", " + std::to_string(valid) + "ull, " +
                             std::to_string(fallback) + "ull, " + std::to_string(ir) + "ull}";
    EXPECT_EQ(size, p.size) << what;
    EXPECT_EQ(valid, p.valid_digest) << what;
    EXPECT_EQ(fallback, p.fallback_digest) << what;
    EXPECT_EQ(ir, p.ir_digest) << what;
  }
}

}  // namespace
}  // namespace ktune::schedule_space
