// End-to-end test of `ktune build --manifest`: three kernels (two of them tuned in the log) in one
// static library and one header, linked into one C program with the runtime, every output
// compared with te's reference (outputs pre-filled with NaN); the header says which kernel is
// tuned and which the fallback; every bad manifest fails with one line naming the kernel and
// leaves no file behind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/deploy/build_test_util.h"

namespace ktune::tools {
namespace {

using namespace build_test;  // NOLINT: the helpers of every build test

struct ManifestKernel {
  std::string name;
  std::string template_name;
  std::vector<std::string> words;
};

const std::vector<ManifestKernel> kKernels = {
    {"gemm", "matmul", {"M=24", "N=32", "K=16"}},
    {"conv", "conv2d_nchwc", {"C=16", "H=8", "W=8", "K=16"}},
    {"dense", "dense_bias_relu", {"M=8", "N=32", "K=16"}},
};

// The manifest of kKernels; args as an object for the first entries, as "key=value" strings
// for the last (both forms are accepted).
std::string manifest_text() {
  nlohmann::json m = nlohmann::json::array();
  for (size_t i = 0; i < kKernels.size(); ++i) {
    const auto& k = kKernels[i];
    nlohmann::json args = nlohmann::json::object();
    for (const auto& w : k.words)
      args[w.substr(0, w.find('='))] = std::stoll(w.substr(w.find('=') + 1));
    m.push_back({{"name", k.name},
                 {"template", k.template_name},
                 {"args", i + 1 < kKernels.size() ? args : nlohmann::json(k.words)}});
  }
  return m.dump(2);
}

TEST(BuildManifestCli, ThreeKernelsInOneLibraryAndHeaderComputeTheReference) {
  TempDir dir;
  // Records for gemm and conv; none for dense, which is the template's fallback.
  std::vector<int64_t> best_ids;
  for (size_t i = 0; i < 2; ++i) {
    const auto task = make_task(kKernels[i].template_name, kKernels[i].words);
    best_ids.push_back(write_log(dir.file("tune.db"), task, pick_configs(task, 2, 40 + i)));
  }
  write_file(dir.file("kernels.json"), manifest_text());
  const Output out =
      ktune_build("--manifest kernels.json --db tune.db --runtime rt.c --json", dir.path());
  ASSERT_EQ(out.status, 0) << out.err;
  // One warning: the untuned kernel, named.
  const auto err = lines_of(out.err);
  ASSERT_EQ(err.size(), 1u) << out.err;
  EXPECT_TRUE(contains(err[0], "kernel 'dense' (entry 2)") && contains(err[0], "fallback"))
      << err[0];
  EXPECT_EQ(listing(dir.path()), (std::set<std::string>{"kernels.h", "kernels.json", "libkernels.a",
                                                        "rt.c", "tune.db"}));

  const auto j = nlohmann::json::parse(out.out);
  EXPECT_EQ(j["library"], "libkernels.a");
  EXPECT_EQ(j["header"], "kernels.h");
  EXPECT_EQ(j["library_bytes"], fs::file_size(dir.file("libkernels.a")));
  ASSERT_EQ(j["kernels"].size(), 3u);
  const std::string header = read_file(dir.file("kernels.h"));
  for (size_t i = 0; i < 3; ++i) {
    const auto& k = j["kernels"][i];
    SCOPED_TRACE(kKernels[i].name);
    EXPECT_EQ(k["symbol"], kKernels[i].name);
    EXPECT_EQ(k["workload"],
              make_task(kKernels[i].template_name, kKernels[i].words).workload_key());
    // The overview at the top of the header says where each kernel's config came from.
    const std::string line = header_field(header, " *   " + kKernels[i].name + ": ");
    if (i < 2) {
      EXPECT_EQ(k["config_source"], "tuned");
      EXPECT_EQ(k["record"]["id"], best_ids[i]);
      EXPECT_TRUE(contains(line, "tuning log tune.db, record " + std::to_string(best_ids[i]) + ":"))
          << line;
    } else {
      EXPECT_EQ(k["config_source"], "fallback");
      EXPECT_TRUE(contains(line, "fallback, untuned")) << line;
    }
    EXPECT_TRUE(contains(header, "int32_t " + kKernels[i].name + "(void* const* args);")) << header;
  }
  // The library: one member per kernel, each defining its symbol (binutils reads LLVM's archive).
  const Output members = shell("ar t " + quote(dir.file("libkernels.a")));
  EXPECT_EQ(members.out, "gemm.o\nconv.o\ndense.o\n");
  const Output symbols = shell("nm --defined-only -g " + quote(dir.file("libkernels.a")));
  for (const auto& k : kKernels)
    EXPECT_TRUE(contains(symbols.out, " T " + k.name + "\n")) << symbols.out;

  // One program calls the three kernels; each output is te's reference.
  std::vector<KernelCall> calls;
  std::vector<std::vector<te::HostBuffer>> references;
  for (size_t i = 0; i < 3; ++i) {
    calls.push_back(
        {j["kernels"][i]["wrapper"], j["kernels"][i]["arguments"], kKernels[i].name + "_"});
    references.push_back(reference_outputs(make_task(kKernels[i].template_name, kKernels[i].words),
                                           calls[i].arguments, dir, calls[i].prefix));
  }
  ASSERT_TRUE(compile_and_run(dir, file_io_program("kernels.h", calls), dir.file("libkernels.a"),
                              dir.file("rt.c"), "cc", "", quote(dir.path().string())));
  for (size_t i = 0; i < 3; ++i)
    expect_outputs_match(references[i], calls[i].arguments, dir, calls[i].prefix);
  // The header is valid C++ too.
  const Output cxx = shell("c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ " +
                           quote(dir.file("kernels.h")));
  EXPECT_EQ(cxx.status, 0) << cxx.err;
}

TEST(BuildManifestCli, BadManifestsFailNamingTheKernelAndWriteNothing) {
  const std::string good =
      R"({"name": "g", "template": "matmul", "args": {"M": 8, "N": 8, "K": 8}})";
  const std::string outs = " -o DIR/lib.a --header DIR/k.h --runtime DIR/rt.c";
  struct Case {
    std::string what, manifest, flags, message;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", "[" + good + ",", "--untuned", "m.json: not valid JSON"},
      {"not a list", good, "--untuned", "must be a JSON array"},
      {"empty list", "[]", "--untuned", "lists no kernel"},
      {"entry not an object", "[" + good + ", 3]", "--untuned", "entry 1 is not an object"},
      {"entry without name", R"([{"template": "matmul"}])", "--untuned", "entry 0: \"name\""},
      {"entry without template", "[" + good + R"(, {"name": "h"}])", "--untuned",
       "kernel 'h' (entry 1): \"template\""},
      {"unknown key", R"([{"name": "g", "template": "matmul", "arg": {}}])", "--untuned",
       "kernel 'g' (entry 0): unknown key \"arg\""},
      {"duplicate names", "[" + good + ", " + good + "]", "--untuned",
       "kernel 'g' (entry 1): the name g"},
      {"name not an identifier", R"([{"name": "my-gemm", "template": "matmul"}])", "--untuned",
       "kernel 'my-gemm' (entry 0): name 'my-gemm' is not a usable C identifier"},
      {"name a keyword", R"([{"name": "int", "template": "matmul"}])", "--untuned",
       "kernel 'int' (entry 0)"},
      {"unknown template", "[" + good + R"(, {"name": "h", "template": "nosuch"}])", "--untuned",
       "kernel 'h' (entry 1): unknown template 'nosuch'"},
      {"unknown argument",
       R"([{"name": "g", "template": "matmul", "args": {"M": 8, "N": 8, "K": 8, "Q": 1}}])",
       "--untuned", "kernel 'g' (entry 0): matmul: unknown argument 'Q'"},
      {"bad extent", R"([{"name": "g", "template": "matmul", "args": ["M=0", "N=8", "K=8"]}])",
       "--untuned", "kernel 'g' (entry 0): matmul: argument M=0"},
      {"args of the wrong type", R"([{"name": "g", "template": "matmul", "args": 5}])", "--untuned",
       "kernel 'g' (entry 0): args must be"},
      {"require_tuned without a record",
       "[" + good +
           R"(, {"name": "h", "template": "matmul", "args": {"M": 9, "N": 8, "K": 8}, "require_tuned": true}])",
       "--db DIR/empty.db", "kernel 'h' (entry 1): no successful record of matmul(M=9"},
      {"require_tuned not a boolean",
       R"([{"name": "g", "template": "matmul", "require_tuned": "yes"}])", "--untuned",
       "require_tuned must be true or false"},
      {"--require-tuned without a log", "[" + good + "]", "--db DIR/missing.db --require-tuned",
       "no tuning log at DIR/missing.db"},
      {"unknown target triple", "[" + good + "]",
       "--untuned --target 'llvm -mtriple=nonsense-unknown-none'",
       "kernel 'g' (entry 0): unknown target triple 'nonsense-unknown-none'"},
      {"missing manifest", "", "--untuned", "cannot read the manifest DIR/none.json"},
      {"template beside --manifest", "[" + good + "]", "matmul M=8 --untuned",
       "--manifest lists the workloads"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    const std::string d = dir.path().string();
    const std::string manifest = c.manifest.empty() ? d + "/none.json" : d + "/m.json";
    if (!c.manifest.empty()) write_file(manifest, c.manifest);
    tuning_db::Database::open(dir.file("empty.db"));
    write_file(dir.file("k.h"), "/* an older header that a failed build must not touch */\n");
    const auto before = snapshot(dir.path());
    const Output out =
        ktune_build("--manifest " + quote(manifest) + " " + replace_dir(c.flags + outs, d));
    expect_one_error_line(out, replace_dir(c.message, d));
    EXPECT_TRUE(snapshot(dir.path()) == before)
        << "no file is changed, and no output or temporary file is left";
  }
}

}  // namespace
}  // namespace ktune::tools
