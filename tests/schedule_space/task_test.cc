// Tests of tasks, workload keys, argument parsing, the registry and instantiation errors.
#include "schedule_space/task.h"

#include <gtest/gtest.h>

#include "support/error.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "tests/schedule_space/template_cases.h"

namespace ktune::schedule_space {
namespace {

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TargetTraits avx512() {
  TargetTraits t;
  t.key = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  t.vector_bits = 512;
  t.cores = 2;
  return t;
}

TEST(Task, WorkloadKeyIsCanonicalAndComplete) {
  const Task t = Task::create("matmul", {{"M", "1024"}, {"N", "0512"}, {"K", "64"}}, avx512());
  EXPECT_EQ(t.workload_key(), "matmul(M=1024,N=512,K=64,layout=nn,dtype=float32)");
  EXPECT_EQ(t.template_name(), "matmul");
  EXPECT_DOUBLE_EQ(t.flop(), 2.0 * 1024 * 512 * 64);
  EXPECT_EQ(t.args_json()["M"], 1024);
  EXPECT_EQ(t.args_json()["layout"], "nn");
  // The key's arguments re-create the same task.
  const Task again = Task::create("matmul", t.args().to_map(), avx512());
  EXPECT_EQ(again.workload_key(), t.workload_key());
  EXPECT_EQ(again.space().size(), t.space().size());
}

TEST(Task, ParseWorkloadArgsFillsDefaults) {
  const auto args = parse_workload_args("conv2d", {"C=64", "H=56", "W=56", "K=64", "pad=1"});
  EXPECT_EQ(args.at("N"), "1");
  EXPECT_EQ(args.at("R"), "3");
  EXPECT_EQ(args.at("stride"), "1");
  EXPECT_EQ(args.at("dtype"), "float32");
  const Task t = Task::create("conv2d", args, avx512());
  EXPECT_EQ(t.workload_key(),
            "conv2d(N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,dtype=float32)");
  EXPECT_DOUBLE_EQ(t.flop(), 2.0 * 64 * 56 * 56 * 64 * 9);
}

TEST(Task, BadArgumentsAreInvalidArgument) {
  const auto tt = avx512();
  EXPECT_EQ(kind_of([&] { Task::create("nosuch", {}, tt); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "0"}, {"N", "4"}, {"K", "4"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "-8"}, {"N", "4"}, {"K", "4"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "8"}, {"N", "4"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "8"}, {"N", "4"}, {"K", "4"}, {"Q", "1"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "8x"}, {"N", "4"}, {"K", "4"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("matmul", {{"M", "8"}, {"N", "4"}, {"K", "4"}, {"dtype", "int3"}}, tt);
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              Task::create("conv2d", {{"C", "3"}, {"H", "2"}, {"W", "8"}, {"K", "4"}}, tt);
            }),
            ErrorKind::kInvalidArgument);  // 3x3 kernel on a 2-row unpadded input
  EXPECT_EQ(kind_of([&] { parse_workload_args("matmul", {"M"}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] {
              parse_workload_args("matmul", {"M=1", "M=2"});
            }),
            ErrorKind::kInvalidArgument);
  try {
    Task::create("matmul", {{"M", "0"}, {"N", "4"}, {"K", "4"}}, tt);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("M=0"), std::string::npos) << e.what();
  }
}

// Sizes whose bytes or FLOPs no kernel could address are refused by name, before any space exists.
TEST(Task, SizesBeyondWhatAKernelCanAddressAreRefused) {
  const auto tt = avx512();
  auto message_of = [&](const std::map<std::string, std::string>& args, const std::string& name) {
    try {
      Task::create(name, args, tt);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string big = "2147483647";
  EXPECT_NE(message_of({{"N", "1"}, {"C", big}, {"H", big}, {"W", big}, {"K", "64"}}, "conv2d")
                .find("tensor I would take more than 2^48 bytes"),
            std::string::npos);
  EXPECT_NE(message_of({{"M", big}, {"N", big}, {"K", big}}, "matmul")
                .find("tensor A would take more than 2^48 bytes"),
            std::string::npos);
  // Every tensor below 2^48 bytes, but 2 * 2^20 * 2^20 * 2^24 = 2^65 FLOPs.
  EXPECT_NE(message_of({{"M", "1048576"}, {"N", "1048576"}, {"K", "16777216"}}, "matmul")
                .find("more than 2^63 floating-point operations"),
            std::string::npos);
  // Large but addressable: 16 GiB per tensor.
  EXPECT_EQ(message_of({{"M", "65536"}, {"N", "65536"}, {"K", "65536"}}, "matmul"), "accepted");
}

TEST(Task, ConfigJsonRoundTripRebuildsTheSameSchedule) {
  const Task t = Task::create("matmul", {{"M", "64"}, {"N", "64"}, {"K", "32"}}, avx512());
  std::mt19937_64 rng(5);
  for (uint64_t i : t.space().sample(20, rng)) {
    const Config cfg = t.space().get(i);
    const Config back = Config::from_json_string(cfg.to_json_string());
    EXPECT_EQ(back, cfg);
    const auto a = t.instantiate(cfg), b = t.instantiate(back);
    EXPECT_EQ(te::to_string(te::lower(a.schedule, a.args, "f")),
              te::to_string(te::lower(b.schedule, b.args, "f")));
  }
}

TEST(Task, InstantiateRejectsForeignAndBrokenConfigs) {
  const Task mm = Task::create("matmul", {{"M", "16"}, {"N", "16"}, {"K", "16"}}, avx512());
  const Task conv =
      Task::create("conv2d", {{"C", "4"}, {"H", "8"}, {"W", "8"}, {"K", "4"}}, avx512());
  // A config of another template.
  EXPECT_EQ(kind_of([&] { mm.instantiate(conv.fallback_config()); }), ErrorKind::kInstantiation);
  // The same without the template tag: its knobs do not match.
  nlohmann::json j = conv.fallback_config().to_json();
  j.erase("template");
  EXPECT_EQ(kind_of([&] { mm.instantiate(Config::from_json(j)); }), ErrorKind::kInstantiation);
  // A knob missing.
  j = mm.fallback_config().to_json();
  j["entity"].erase(0);
  EXPECT_EQ(kind_of([&] { mm.instantiate(Config::from_json(j)); }), ErrorKind::kInstantiation);
  // A non-positive split factor.
  j = mm.fallback_config().to_json();
  j["entity"][0][2] = {-1, 0, 4};
  EXPECT_EQ(kind_of([&] { mm.instantiate(Config::from_json(j)); }), ErrorKind::kInstantiation);
  // A knob of the wrong kind.
  j = mm.fallback_config().to_json();
  j["entity"][3] = {"unroll_k", "sp", {-1, 2}};
  EXPECT_EQ(kind_of([&] { mm.instantiate(Config::from_json(j)); }), ErrorKind::kInstantiation);
  // Malformed JSON is an argument error before any task sees it.
  EXPECT_EQ(
      kind_of([&] { Config::from_json_string("{\"index\": 1, \"entity\": [[\"tile_y\"]]}"); }),
      ErrorKind::kInvalidArgument);
}

TEST(Task, ConstraintsRejectTooLargeRegisterTiles) {
  const Task t = Task::create("matmul", {{"M", "64"}, {"N", "256"}, {"K", "64"}}, avx512());
  const ConfigSpace& s = t.space();
  ASSERT_EQ(s.knob(0).name(), "tile_y");
  ASSERT_EQ(s.knob(1).name(), "tile_x");
  // 16 rows x 4 vectors of 16 lanes = 64 accumulators > 30 registers.
  std::vector<uint64_t> d(s.num_knobs(), 0);
  for (uint64_t i = 0; i < s.knob(0).size(); ++i)
    if (s.knob(0).entity(i).values.back() == 16) d[0] = i;
  for (uint64_t i = 0; i < s.knob(1).size(); ++i)
    if (s.knob(1).entity(i).values.back() == 64) d[1] = i;
  const uint64_t bad = s.index_of(d);
  EXPECT_FALSE(s.is_valid(bad));
  EXPECT_EQ(kind_of([&] { t.instantiate(s.get(bad)); }), ErrorKind::kInstantiation);
  // Every sampled config respects the register budget.
  std::mt19937_64 rng(9);
  for (uint64_t i : s.sample(200, rng)) {
    const Config c = s.get(i);
    EXPECT_LE(c["tile_y"].values.back() * (c["tile_x"].values.back() / 16), 30);
  }
}

TEST(Task, FallbackIsValidAndNotNaive) {
  const Task t = Task::create("matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}, avx512());
  const Config& f = t.fallback_config();
  EXPECT_TRUE(t.space().is_valid(t.space().index_of(f)));
  EXPECT_GE(f["tile_x"].values.back(), 16);  // whole vectors
  EXPECT_GE(f["tile_y"].values.back(), 4);   // a real register tile
  EXPECT_EQ(f["parallel"].as_int(), 1);
  EXPECT_EQ(f["pack_b"].as_int(), 1);
  for (const auto& c : testing::small_cases()) {
    const Task small = Task::create(c.template_name, c.args, testing::small_target());
    EXPECT_TRUE(small.space().is_valid(small.space().index_of(small.fallback_config()))) << c.name;
  }
}

// A GEMV whose B is stored [N,K] (matmul layout=nt, dense) reads B's rows in dot-product form:
// the space offers it, the fallback takes it; B stored [K,N] has no use for it.
TEST(Task, GemvWithRowsOfBHasADotProductForm) {
  const Task nt =
      Task::create("matmul", {{"M", "1"}, {"N", "1000"}, {"K", "512"}, {"layout", "nt"}}, avx512());
  ASSERT_NE(nt.space().find_knob("dot_lanes"), nullptr);
  EXPECT_EQ(nt.fallback_config()["dot_lanes"].as_int(), 16);
  const Task nn = Task::create("matmul", {{"M", "1"}, {"N", "1000"}, {"K", "512"}}, avx512());
  EXPECT_EQ(nn.space().find_knob("dot_lanes"), nullptr);
  const Task batched = Task::create(
      "batch_matmul", {{"batch", "2"}, {"M", "1"}, {"N", "64"}, {"K", "64"}, {"layout", "nt"}},
      avx512());
  EXPECT_EQ(batched.space().find_knob("dot_lanes"), nullptr);
}

// A GEMV or tiny batch whose B is stored [K,N] (matmul layout=nn, batch_matmul) can stream B's rows
// (stream_b); never packed, and a config logged before the knob means the column-panel form.
TEST(Task, GemvWithColumnsOfBHasARowStream) {
  for (const char* m : {"1", "4"}) {
    const Task nn = Task::create("matmul", {{"M", m}, {"N", "1000"}, {"K", "512"}}, avx512());
    ASSERT_NE(nn.space().find_knob("stream_b"), nullptr) << m;
    EXPECT_EQ(nn.fallback_config()["stream_b"].as_int(), 0);
  }
  EXPECT_EQ(Task::create("matmul", {{"M", "5"}, {"N", "1000"}, {"K", "512"}}, avx512())
                .space()
                .find_knob("stream_b"),
            nullptr);
  EXPECT_EQ(
      Task::create("matmul", {{"M", "1"}, {"N", "1000"}, {"K", "512"}, {"layout", "nt"}}, avx512())
          .space()
          .find_knob("stream_b"),
      nullptr);
  EXPECT_EQ(Task::create("dense_bias_relu", {{"M", "1"}, {"N", "1000"}, {"K", "512"}}, avx512())
                .space()
                .find_knob("stream_b"),
            nullptr);
  const Task batched = Task::create(
      "batch_matmul", {{"batch", "2"}, {"M", "1"}, {"N", "64"}, {"K", "64"}}, avx512());
  ASSERT_NE(batched.space().find_knob("stream_b"), nullptr);
  // Every valid config that streams B leaves it unpacked.
  const Task gemv = Task::create("matmul", {{"M", "1"}, {"N", "1000"}, {"K", "512"}}, avx512());
  size_t streamed = 0;
  for (uint64_t i = 0; i < gemv.space().size(); ++i) {
    if (!gemv.space().is_valid(i)) continue;
    const Config c = gemv.space().get(i);
    if (c["stream_b"].as_int() == 0) continue;
    ++streamed;
    EXPECT_EQ(c["pack_b"].as_int(), 0) << c.to_json_string();
  }
  EXPECT_GT(streamed, 100u);
  std::vector<Entity> old_entities;
  for (const Entity& e : gemv.fallback_config().entities())
    if (e.name != "stream_b") old_entities.push_back(e);
  EXPECT_EQ(gemv.space().complete(Config("matmul", 0, old_entities))["stream_b"].as_int(), 0);
}

// A knob added after configs were logged: a config without it means its legacy value, so an old
// record still instantiates, indexes and passes the constraints (dense M=8 gained dot_lanes).
TEST(Task, ConfigsOlderThanAKnobTakeItsLegacyValue) {
  const Task t =
      Task::create("dense_bias_relu", {{"M", "8"}, {"N", "1000"}, {"K", "512"}}, avx512());
  ASSERT_NE(t.space().find_knob("dot_lanes"), nullptr);
  const Config fallback = t.fallback_config();
  std::vector<Entity> old_entities;
  for (const Entity& e : fallback.entities())
    if (e.name != "dot_lanes") old_entities.push_back(e);
  const Config old("dense_bias_relu", 0, old_entities);
  const Config completed = t.space().complete(old);
  EXPECT_EQ(completed["dot_lanes"].as_int(), 0);
  EXPECT_EQ(t.space().get(t.space().index_of(old))["dot_lanes"].as_int(), 0);
  EXPECT_EQ(t.space().rejecting_constraint(old), "");
  EXPECT_NO_THROW(t.instantiate(old));
  ConfigSpace space("test");
  space.define_knob("k", std::vector<int64_t>{0, 4});
  EXPECT_EQ(kind_of([&] { space.set_legacy_value("nope", 0); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { space.set_legacy_value("k", 3); }), ErrorKind::kInvalidArgument);
  // Without a legacy value a missing knob is still an error.
  std::vector<Entity> no_tile;
  for (const Entity& e : fallback.entities())
    if (e.name != "tile_k") no_tile.push_back(e);
  EXPECT_EQ(kind_of([&] { t.instantiate(Config("dense_bias_relu", 0, no_tile)); }),
            ErrorKind::kInstantiation);
}

TEST(Task, LargeSpacesAreRich) {
  const Task mm = Task::create("matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}, avx512());
  EXPECT_GT(mm.space().size(), 10000u);
  const Task conv = Task::create(
      "conv2d", parse_workload_args("conv2d", {"C=64", "H=56", "W=56", "K=64", "pad=1"}), avx512());
  EXPECT_GT(conv.space().size(), 10000u);
}

TEST(Registry, OpenForTestTemplates) {
  TemplateDef d;
  d.name = "test_copy";
  d.doc = "B = A + 1";
  d.args = {{.name = "n", .default_value = "8", .doc = "length"}};
  auto build = [](const WorkloadArgs& w) {
    te::Tensor a = te::placeholder({w.get_int("n")}, te::Float(32), "A");
    te::Tensor b = te::compute(
        {w.get_int("n")}, [&](te::Var i) { return a(i) + te::Expr(1.0f); }, "B");
    return ComputeDef{{a, b}, {b}};
  };
  d.compute = build;
  d.flop = [](const WorkloadArgs& w) { return static_cast<double>(w.get_int("n")); };
  d.define = [](const WorkloadArgs& w, const TargetTraits&, ConfigSpace& s) {
    s.define_split("tile", {.extent = w.get_int("n"), .num_outputs = 2});
  };
  d.apply = [build](const WorkloadArgs& w, const TargetTraits&, const Config& cfg) {
    ComputeDef c = build(w);
    te::Schedule s = te::create_schedule(c.outputs);
    s[c.outputs[0]].split(s[c.outputs[0]].axis(0), cfg["tile"].split_factors(w.get_int("n"))[1]);
    return Instantiated{s, c.args};
  };
  register_template(d);
  EXPECT_EQ(kind_of([&] { register_template(d); }), ErrorKind::kInvalidArgument);
  const Task t = Task::create("test_copy", {}, avx512());
  EXPECT_EQ(t.workload_key(), "test_copy(n=8)");
  EXPECT_EQ(t.space().size(), 4u);
  const testing::Oracle oracle(t, 1);
  const auto inst = t.instantiate(t.space().get(2));
  const auto f = te::lower(inst.schedule, inst.args, "copy");
  EXPECT_LT(oracle.check([&](const std::vector<void*>& a) { te::interpret(f, a); }), 1e-6);
}

}  // namespace
}  // namespace ktune::schedule_space
