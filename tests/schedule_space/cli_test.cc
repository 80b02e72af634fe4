// End-to-end test of `ktune templates`, `ktune space` and `ktune lower`: what they print is
// compared with the registry, the Task and the lowered IR computed here through the API, and
// every bad input must fail with a non-zero status and one clear line on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "schedule_space/template_registry.h"
#include "te/ir_printer.h"
#include "te/lower.h"
#include "tests/cli_util.h"

namespace ktune::schedule_space {
namespace {

using testing_cli::ktune;
using testing_cli::Output;
using testing_cli::quote;

// The traits of the host exactly as tools/cmd_space.cc and tools/cmd_lower.cc build them for
// the default `--target host`.
TargetTraits host_traits() {
  const codegen::Target target = codegen::Target::parse("host");
  return make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
}

struct Workload {
  std::string template_name;
  std::vector<std::string> words;  // key=value, as typed on the command line

  std::string cli() const {
    std::string s = template_name;
    for (const auto& w : words) s += " " + w;
    return s;
  }
  Task task() const {
    return Task::create(template_name, parse_workload_args(template_name, words), host_traits());
  }
};

// One workload per built-in template (small, so that the commands run fast).
std::vector<Workload> workloads() {
  return {
      {"matmul", {"M=64", "N=64", "K=64"}},
      {"dense_bias_relu", {"M=8", "N=32", "K=16"}},
      {"batch_matmul", {"batch=2", "M=8", "N=32", "K=16", "layout=nt"}},
      {"conv2d", {"C=3", "H=10", "W=10", "K=8", "pad=1"}},
      {"conv2d_nchwc", {"C=16", "H=8", "W=8", "K=16"}},
      {"depthwise_conv2d", {"C=8", "H=10", "W=10", "stride=2", "pad=1"}},
      {"max_pool2d", {"C=4", "H=9", "W=9", "R=3", "S=3", "pad=1"}},
      {"avg_pool2d", {"C=4", "H=8", "W=12"}},
  };
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The text after "<prefix>" on the first line that starts with it.
std::optional<std::string> field(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) return l.substr(prefix.size());
  return std::nullopt;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What `ktune lower` must print for `config` (or the reference schedule when nullopt).
std::string expected_lower(const Task& task, const std::optional<Config>& config) {
  const Instantiated inst = config ? task.instantiate(*config) : task.reference();
  const TargetTraits& t = task.target();
  std::string text = "// " + task.workload_key() + "\n// target " + t.key + ": " +
                     std::to_string(t.vector_bits) + "-bit vectors, " +
                     std::to_string(t.vector_registers()) + " vector registers\n";
  if (config) text += "// config " + config->to_json_string() + "\n";
  return text + te::to_string(te::lower(inst.schedule, inst.args, task.template_name()));
}

// The first valid config index of `task` for which `pick` holds.
std::optional<uint64_t> find_index(const Task& task,
                                   const std::function<bool(const Config&)>& pick) {
  const ConfigSpace& space = task.space();
  for (uint64_t i = 0; i < space.size(); ++i)
    if (space.is_valid(i) && pick(space.get(i))) return i;
  return std::nullopt;
}

// ---- templates ----

std::set<std::string> registry_names() {
  std::set<std::string> names;
  for (const auto& t : TemplateRegistry::global().list()) names.insert(t->name);
  return names;
}

TEST(TemplatesCli, ListsEveryRegisteredTemplateWithItsArguments) {
  const std::set<std::string> builtins = {"matmul",     "dense_bias_relu", "batch_matmul",
                                          "conv2d",     "conv2d_nchwc",    "depthwise_conv2d",
                                          "max_pool2d", "avg_pool2d"};
  const std::set<std::string> names = registry_names();
  for (const auto& b : builtins) EXPECT_TRUE(names.count(b)) << b << " is not in the registry";

  Output out = ktune("templates");
  ASSERT_EQ(out.status, 0);
  // A template line is "<name>  <doc>" without indentation; its arguments follow, indented.
  std::set<std::string> listed;
  for (const auto& line : lines_of(out.out))
    if (!line.empty() && line[0] != ' ') listed.insert(line.substr(0, line.find("  ")));
  EXPECT_EQ(listed, names);

  for (const auto& t : TemplateRegistry::global().list()) {
    EXPECT_TRUE(contains(out.out, t->name + "  " + t->doc + "\n")) << t->name;
    for (const auto& a : t->args) {
      const std::string head =
          "    " + a.name + (a.default_value.empty() ? " (required)" : "=" + a.default_value);
      EXPECT_TRUE(contains(out.out, head)) << t->name << ": " << head;
    }
  }
}

TEST(TemplatesCli, JsonMatchesTheRegistry) {
  Output out = ktune("templates --json");
  ASSERT_EQ(out.status, 0);
  const auto j = nlohmann::json::parse(out.out);
  ASSERT_TRUE(j.is_array());
  const auto defs = TemplateRegistry::global().list();
  ASSERT_EQ(j.size(), defs.size());
  for (size_t i = 0; i < defs.size(); ++i) {
    const auto& t = *defs[i];
    EXPECT_EQ(j[i]["name"], t.name);
    EXPECT_EQ(j[i]["doc"], t.doc);
    ASSERT_EQ(j[i]["args"].size(), t.args.size()) << t.name;
    for (size_t a = 0; a < t.args.size(); ++a) {
      const auto& ja = j[i]["args"][a];
      const ArgSpec& spec = t.args[a];
      EXPECT_EQ(ja["name"], spec.name);
      EXPECT_EQ(ja["type"], spec.type == ArgSpec::Type::kInt ? "int" : "string");
      if (spec.default_value.empty()) {
        EXPECT_EQ(ja["required"], true) << t.name << "." << spec.name;
        EXPECT_FALSE(ja.contains("default"));
      } else {
        EXPECT_EQ(ja["default"], spec.default_value) << t.name << "." << spec.name;
      }
      if (!spec.choices.empty()) {
        EXPECT_EQ(ja["choices"].get<std::vector<std::string>>(), spec.choices);
      }
    }
  }
}

// ---- space ----

TEST(SpaceCli, PrintsTheTaskSpaceOfEveryTemplate) {
  const TargetTraits traits = host_traits();
  for (const auto& w : workloads()) {
    SCOPED_TRACE(w.cli());
    const Task task = w.task();
    Output out = ktune("space " + w.cli());
    ASSERT_EQ(out.status, 0);
    const auto lines = lines_of(out.out);
    EXPECT_EQ(field(lines, "workload: "), task.workload_key());
    EXPECT_EQ(field(lines, "target:   "), traits.key);
    const auto flop = field(lines, "flop:     ");
    ASSERT_TRUE(flop);
    // Printed with the stream's default 6 significant digits.
    EXPECT_NEAR(std::stod(*flop), task.flop(), task.flop() * 1e-5);
    EXPECT_EQ(field(lines, "size: "), std::to_string(task.space().size()));

    const ConfigSpace& space = task.space();
    for (size_t i = 0; i < space.num_knobs(); ++i) {
      const Knob& k = space.knob(i);
      EXPECT_NE(std::find(lines.begin(), lines.end(), k.name() + ": " + k.describe()), lines.end())
          << k.name();
    }
    for (const auto& c : space.constraints())
      EXPECT_NE(std::find(lines.begin(), lines.end(), "constraint: " + c.name), lines.end())
          << c.name;

    const auto fallback = field(lines, "fallback: ");
    ASSERT_TRUE(fallback);
    const Config printed = Config::from_json_string(*fallback);
    EXPECT_EQ(printed.index(), task.fallback_config().index());
    EXPECT_EQ(printed, task.fallback_config());
  }
}

TEST(SpaceCli, JsonMatchesTheTask) {
  const TargetTraits traits = host_traits();
  for (const auto& w : workloads()) {
    SCOPED_TRACE(w.cli());
    const Task task = w.task();
    Output out = ktune("space " + w.cli() + " --json");
    ASSERT_EQ(out.status, 0);
    const auto j = nlohmann::json::parse(out.out);
    EXPECT_EQ(j["workload"], task.workload_key());
    EXPECT_EQ(j["target"], traits.key);
    EXPECT_EQ(j["flop"].get<double>(), task.flop());
    EXPECT_EQ(j["size"].get<uint64_t>(), task.space().size());
    const ConfigSpace& space = task.space();
    ASSERT_EQ(j["knobs"].size(), space.num_knobs());
    for (size_t i = 0; i < space.num_knobs(); ++i) {
      EXPECT_EQ(j["knobs"][i]["name"], space.knob(i).name());
      EXPECT_EQ(j["knobs"][i]["kind"], std::string(to_string(space.knob(i).kind())));
      EXPECT_EQ(j["knobs"][i]["size"].get<uint64_t>(), space.knob(i).size());
    }
    ASSERT_EQ(j["constraints"].size(), space.constraints().size());
    const Config fallback = Config::from_json(j["fallback"]);
    EXPECT_EQ(fallback.index(), task.fallback_config().index());
    EXPECT_EQ(fallback, task.fallback_config());
  }
}

TEST(SpaceCli, OmittedArgumentsTakeTheirDefaults) {
  const Workload w{"conv2d", {"C=3", "H=10", "W=10", "K=8"}};
  Output out = ktune("space " + w.cli() + " --json");
  ASSERT_EQ(out.status, 0);
  EXPECT_EQ(nlohmann::json::parse(out.out)["workload"],
            "conv2d(N=1,C=3,H=10,W=10,K=8,R=3,S=3,stride=1,pad=0,dilation=1,dtype=float32)");
}

// ---- lower ----

class LowerCli : public ::testing::Test {
 protected:
  const Workload w_{"matmul", {"M=64", "N=64", "K=64"}};
  const Task task_ = w_.task();
};

TEST_F(LowerCli, IndexPrintsTheIrOfThatConfig) {
  // Two configs that differ in what the printer must show: a parallel outer loop and packed B,
  // or neither.
  const auto par = find_index(task_, [](const Config& c) {
    return c["parallel"].as_int() == 1 && c["pack_b"].as_int() == 1;
  });
  const auto serial = find_index(task_, [](const Config& c) {
    return c["parallel"].as_int() == 0 && c["pack_b"].as_int() == 0;
  });
  if (task_.space().find_knob("parallel")->size() > 1) {
    ASSERT_TRUE(par) << "no valid parallel config";
  }
  ASSERT_TRUE(serial);

  for (const auto& index : {par, serial}) {
    if (!index) continue;  // one core: the parallel knob only has 0
    const Config config = task_.space().get(*index);
    SCOPED_TRACE(config.to_json_string());
    Output out = ktune("lower " + w_.cli() + " --index " + std::to_string(*index));
    ASSERT_EQ(out.status, 0);
    EXPECT_EQ(out.out, expected_lower(task_, config));
    const bool parallel = config["parallel"].as_int() == 1;
    EXPECT_EQ(contains(out.out, "parallel for ("), parallel);
    EXPECT_EQ(contains(out.out, "B.pack["), config["pack_b"].as_int() == 1);
    EXPECT_TRUE(contains(out.out, "ramp("));  // the vectorized columns
    // The register tile is tile_y's innermost factor times tile_x's.
    const int64_t ty = config["tile_y"].split_factors(64).back();
    const int64_t tx = config["tile_x"].split_factors(64).back();
    EXPECT_TRUE(contains(out.out, "float32 C.local[" + std::to_string(ty * tx) + "]")) << out.out;
  }
}

TEST_F(LowerCli, DefaultIsTheFallbackAndReferenceDiffers) {
  Output fallback = ktune("lower " + w_.cli());
  ASSERT_EQ(fallback.status, 0);
  EXPECT_EQ(fallback.out, expected_lower(task_, task_.fallback_config()));

  Output ref = ktune("lower " + w_.cli() + " --reference");
  ASSERT_EQ(ref.status, 0);
  EXPECT_EQ(ref.out, expected_lower(task_, std::nullopt));
  EXPECT_NE(ref.out, fallback.out);
  EXPECT_FALSE(contains(ref.out, "// config"));
  EXPECT_FALSE(contains(ref.out, "parallel for"));
  EXPECT_FALSE(contains(ref.out, "ramp("));
  EXPECT_TRUE(contains(ref.out, "for (k, 0, 64)")) << ref.out;  // the untiled reduction
}

TEST_F(LowerCli, ConfigJsonAndFileGiveTheSameOutputAsIndex) {
  const auto index = find_index(
      task_, [&](const Config& c) { return c.index() != task_.fallback_config().index(); });
  ASSERT_TRUE(index);
  const Config config = task_.space().get(*index);
  Output by_index = ktune("lower " + w_.cli() + " --index " + std::to_string(*index));
  ASSERT_EQ(by_index.status, 0);
  Output by_json = ktune("lower " + w_.cli() + " --config " + quote(config.to_json_string()));
  ASSERT_EQ(by_json.status, 0);
  EXPECT_EQ(by_json.out, by_index.out);

  char path[] = "/tmp/ktune_cli_config_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  { std::ofstream(path) << config.to_json().dump(2) << "\n"; }
  Output by_file = ktune("lower " + w_.cli() + " --config @" + quote(path));
  std::remove(path);
  ASSERT_EQ(by_file.status, 0);
  EXPECT_EQ(by_file.out, by_index.out);
}

TEST_F(LowerCli, JsonParsesAndCarriesTheIr) {
  const uint64_t index = task_.fallback_config().index();
  Output out = ktune("lower " + w_.cli() + " --index " + std::to_string(index) + " --json");
  ASSERT_EQ(out.status, 0);
  const auto j = nlohmann::json::parse(out.out);
  EXPECT_EQ(j["workload"], task_.workload_key());
  const Config config = task_.space().get(index);
  EXPECT_EQ(Config::from_json(j["config"]), config);
  const Instantiated inst = task_.instantiate(config);
  EXPECT_EQ(j["ir"], te::to_string(te::lower(inst.schedule, inst.args, "matmul")));

  Output ref = ktune("lower " + w_.cli() + " --reference --json");
  ASSERT_EQ(ref.status, 0);
  const auto r = nlohmann::json::parse(ref.out);
  EXPECT_FALSE(r.contains("config"));
  EXPECT_NE(r["ir"], j["ir"]);
}

TEST(LowerCliNchwc, IndexThreeOfTheBriefExample) {
  const Workload w{"conv2d_nchwc", {"C=16", "H=8", "W=8", "K=16"}};
  const Task task = w.task();
  ASSERT_GT(task.space().size(), 3u);
  Output out = ktune("lower " + w.cli() + " --index 3");
  if (!task.space().is_valid(3)) {
    EXPECT_NE(out.status, 0);
    return;
  }
  ASSERT_EQ(out.status, 0);
  const Config config = task.space().get(3);
  EXPECT_EQ(out.out, expected_lower(task, config));
  EXPECT_EQ(contains(out.out, "parallel for ("), config["parallel"].as_int() == 1);
  EXPECT_TRUE(contains(out.out, "ramp("));  // the oc block is vectorized
}

// ---- bad input ----

// The run failed with status 1, printed nothing on stdout and exactly one line on stderr, an
// error line containing every one of `parts`.
void expect_one_error_line(const std::string& args, const std::vector<std::string>& parts) {
  SCOPED_TRACE("ktune " + args);
  Output out = ktune(args, true);
  EXPECT_EQ(out.status, 1);
  EXPECT_EQ(out.out, "");
  ASSERT_FALSE(out.err.empty());
  EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
  EXPECT_EQ(out.err.back(), '\n');
  EXPECT_EQ(out.err.rfind("ktune: error: ", 0), 0u) << out.err;
  for (const auto& p : parts)
    EXPECT_TRUE(contains(out.err, p)) << "missing '" << p << "' in: " << out.err;
}

TEST(BadInputCli, UnknownTemplate) {
  expect_one_error_line("space nosuch M=1", {"unknown template 'nosuch'", "matmul"});
  expect_one_error_line("lower nosuch M=1", {"unknown template 'nosuch'"});
}

TEST(BadInputCli, BadOrUnknownArgument) {
  expect_one_error_line("space matmul M=0 N=4 K=4", {"matmul", "M=0"});
  expect_one_error_line("space matmul M=4 N=4 K=4 Q=3", {"matmul", "unknown argument 'Q'"});
  expect_one_error_line("space matmul M=x N=4 K=4", {"M=x", "not an integer"});
  expect_one_error_line("space matmul N=4 K=4", {"missing argument 'M'"});
  expect_one_error_line("space matmul M4 N=4 K=4", {"'M4'", "key=value"});
  expect_one_error_line("space matmul M=4 N=4 K=4 dtype=int8", {"dtype=int8"});
  expect_one_error_line("lower matmul M=-3 N=4 K=4", {"M=-3"});
}

TEST(BadInputCli, MalformedConfig) {
  const std::string wl = "matmul M=64 N=64 K=64";
  expect_one_error_line("lower " + wl + " --config " + quote("{bad"), {"malformed config JSON"});
  expect_one_error_line("lower " + wl + " --config " + quote(R"({"index": 1})"), {"entity"});
  expect_one_error_line("lower " + wl + " --config @/nonexistent/ktune_config.json",
                        {"/nonexistent/ktune_config.json"});
  expect_one_error_line("lower conv2d_nchwc C=16 H=8 W=8 K=16 --config " +
                            quote(R"({"index":0,"template":"matmul","entity":[]})"),
                        {"matmul", "conv2d_nchwc"});
}

TEST(BadInputCli, IndexOutOfRangeOrInvalid) {
  const Task task = Workload{"matmul", {"M=64", "N=64", "K=64"}}.task();
  const uint64_t size = task.space().size();
  expect_one_error_line("lower matmul M=64 N=64 K=64 --index " + std::to_string(size),
                        {std::to_string(size), "out of range"});
  // A config the constraints reject names the constraint.
  std::optional<uint64_t> invalid;
  for (uint64_t i = 0; i < size && !invalid; ++i)
    if (!task.space().is_valid(i)) invalid = i;
  ASSERT_TRUE(invalid);
  const std::string constraint = task.space().rejecting_constraint(task.space().get(*invalid));
  expect_one_error_line("lower matmul M=64 N=64 K=64 --index " + std::to_string(*invalid),
                        {constraint});
}

TEST(BadInputCli, NegativeIndexIsRejected) {
  expect_one_error_line("lower matmul M=64 N=64 K=64 --index -5", {"-5"});
}
// CLI11's parse errors too are one "ktune: error:" line with status 1.
TEST(BadInputCli, ParseErrorsAreOneLine) {
  expect_one_error_line("lower matmul M=64 N=64 K=64 --index abc", {"--index", "abc"});
  expect_one_error_line("lower matmul M=64 N=64 K=64 --index 1 --config {}",
                        {"--config", "--index"});
  expect_one_error_line("space", {"template"});
}

// Sizes are at most 2^31 - 1; the largest prime of them still defines its space at once (split
// knobs look for divisors up to sqrt(extent); walking every number up to it took minutes).
TEST(SpaceCli, LargestSizeIsDefinedAndLargerIsRejected) {
  const Output out = ktune("space matmul M=2147483647 N=16 K=16");
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.out.find("tile_y: split extent=2147483647"), std::string::npos) << out.out;
  expect_one_error_line("space matmul M=4611686018427387904 N=16 K=16",
                        {"M=4611686018427387904", "<= 2147483647"});
}

}  // namespace
}  // namespace ktune::schedule_space
