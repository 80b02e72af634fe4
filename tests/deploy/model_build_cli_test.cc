// Tests of whole-model builds: `ktune build --model` linked into a C program and `ktune run`, each
// output compared with ONNX Runtime's on the same inputs; external weights checked by hash; bad
// input as one line with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/frontend/test_models.h"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using testing_cli::ktune;
using testing_cli::quote;
using testing_cli::shell;
using testing_models::model;

// max |a - ref| / max |ref| of one output: the tolerance below is 1e-4 of the output's magnitude
// (float32 sums in another order differ by ~1e-6; a wrong weight, layout or epilogue by ~1).
constexpr double kTolerance = 1e-4;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ModelBuild : public ::testing::Test {
 protected:
  void linked_and_cross_built_match_ort(
      const std::vector<std::pair<std::string, std::string>>& models);

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ktune_model_build_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Random float32 inputs (uniform in [-1, 1)) of `count` values, written to a file.
  std::string inputs(int64_t count, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = u(rng);
    const std::string p = path("in.bin");
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    return p;
  }

  // Random token ids in [0, below) of `count` values of int64 (8 bytes) or int32 (4), written to
  // a file: the input of a model that indexes constant tables.
  std::string ids(int64_t count, int64_t below, size_t bytes, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> u(0, below - 1);
    std::string data;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = u(rng);
      const int32_t narrow = static_cast<int32_t>(v);
      data.append(
          bytes == 8 ? reinterpret_cast<const char*>(&v) : reinterpret_cast<const char*>(&narrow),
          bytes);
    }
    const std::string p = path("in.bin");
    std::ofstream(p, std::ios::binary)
        .write(data.data(), static_cast<std::streamsize>(data.size()));
    return p;
  }

  static std::vector<float> floats(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  }

  // ONNX Runtime's outputs of the model on the inputs file (scripts/ort-run.js, one thread).
  // `input`: the --input shape of a model with symbolic dimensions ("" = the model's own).
  std::vector<float> ort(const std::string& onnx, const std::string& in,
                         const std::string& input = "") const {
    const std::string out = path("ort.bin");
    const auto r = shell(
        "NODE_PATH=" + quote(std::string(KTUNE_ORT_DIR) + "/node_modules") + " node " +
        quote(std::string(KTUNE_SOURCE_DIR_PATH) + "/scripts/ort-run.js") + " " + quote(onnx) +
        " " + quote(in) + " " + quote(out) + (input.empty() ? "" : " --input " + quote(input)));
    EXPECT_EQ(r.status, 0) << r.err;
    return floats(out);
  }

  // The model's outputs from `ktune run` (in process, one run, untuned) on the inputs file; empty
  // (a failed expectation) when it fails.
  std::vector<float> run_in_process(const std::string& onnx, const std::string& in) const {
    const std::string out = path("jit.bin");
    const auto r =
        ktune("run " + quote(onnx) + " --untuned" + " --runs 1 --warmup 0 --input-file " +
                  quote(in) + " --output-file " + quote(out),
              true);
    EXPECT_EQ(r.status, 0) << onnx << ": " << r.err;
    return r.status == 0 ? floats(out) : std::vector<float>{};
  }

  static double error(const std::vector<float>& got, const std::vector<float>& ref) {
    EXPECT_EQ(got.size(), ref.size());
    if (got.size() != ref.size() || ref.empty()) return INFINITY;
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
      max_diff =
          std::max(max_diff, std::abs(static_cast<double>(got[i]) - ref[i]));  // NaN makes it NaN
      if (std::isnan(got[i])) return INFINITY;
    }
    return max_diff / max_ref;
  }

  // `ktune run --check-nodes` (untuned): every step of the model within 1e-5 of its reference.
  void expect_steps_match_references(const std::string& onnx) const {
    const auto nodes =
        ktune("run " + quote(onnx) + " --untuned" + " --check-nodes --tolerance 1e-5", true);
    EXPECT_EQ(nodes.status, 0) << nodes.out << nodes.err;
  }

  // The model's outputs from `ktune build --model` (untuned) linked into program(); empty (a
  // failed expectation) when the build or the program fails.
  std::vector<float> run_linked(const std::string& onnx, const std::string& in) const {
    const auto built =
        ktune("build --model " + quote(onnx) + " --untuned" + " -o " + quote(path("libnet.a")) +
                  " --header " + quote(path("net.h")) + " --runtime " + quote(path("runtime.c")),
              true);
    EXPECT_EQ(built.status, 0) << built.err;
    if (built.status != 0) return {};
    const auto ran =
        shell(quote(program("net", false)) + " " + quote(in) + " " + quote(path("out.bin")));
    EXPECT_EQ(ran.status, 0) << ran.err;
    return ran.status == 0 ? floats(path("out.bin")) : std::vector<float>{};
  }

  // How far a dequantized output is from ONNX Runtime's, in steps of its DequantizeLinear's scale
  // (the smallest gap between two of ONNX Runtime's values): the largest distance and how many
  // elements are apart at all.
  struct Steps {
    double worst = 0;
    int64_t apart = 0;
    double step = INFINITY;
  };
  static Steps steps_apart(const std::vector<float>& got, const std::vector<float>& ref) {
    Steps r;
    EXPECT_EQ(got.size(), ref.size());
    if (got.size() != ref.size()) return {INFINITY, static_cast<int64_t>(ref.size()), 0};
    std::vector<float> sorted = ref;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i] > sorted[i - 1])
        r.step = std::min(r.step, static_cast<double>(sorted[i] - sorted[i - 1]));
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::abs(static_cast<double>(got[i]) - ref[i]) / r.step;
      r.worst = std::isnan(d) ? INFINITY : std::max(r.worst, d);
      r.apart += d > 0.01;
    }
    return r;
  }

  // A C program that runs the model in two contexts on two threads (each must give the same bits),
  // reading the inputs file and writing the outputs file; with a weights file as argv[3]. `cc` is
  // the compiler command (a cross compiler's with -static for a program run under qemu).
  std::string program(const std::string& name, bool external_weights,
                      const std::string& cc = "cc") const {
    const std::string c = path("main.c");
    std::ofstream(c)
        << "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        << "#include \"" << name << ".h\"\n"
        << "static float *in, *out0, *out1;\nstatic void* ctx1;\n"
        << "static void* other(void* arg) { (void)arg; return (void*)(long)" << name
        << "_run(ctx1, in, out1); }\n"
        << "static float* buffer(long n) { return aligned_alloc(64, (n * 4 + 63) / 64 * 64); }\n"
        << "int main(int argc, char** argv) {\n"
        << "  if (argc < 3) return 9;\n"
        << "  in = buffer(" << name << "_INPUT0_ELEMENTS);\n"
        << "  out0 = buffer(" << name << "_OUTPUT0_ELEMENTS); out1 = buffer(" << name
        << "_OUTPUT0_ELEMENTS);\n"
        << "  for (long i = 0; i < " << name
        << "_OUTPUT0_ELEMENTS; ++i) out0[i] = out1[i] = 0.0f / 0.0f;\n"
        << "  FILE* f = fopen(argv[1], \"rb\");\n"
        << "  if (!f || fread(in, 4, " << name << "_INPUT0_ELEMENTS, f) != " << name
        << "_INPUT0_ELEMENTS) return 8;\n"
        << "  fclose(f);\n"
        << "  void* ctx0 = " << name << "_create(" << (external_weights ? "argv[3]" : "") << ");\n"
        << "  ctx1 = " << name << "_create(" << (external_weights ? "argv[3]" : "") << ");\n"
        << "  if (!ctx0 || !ctx1) { fprintf(stderr, \"create failed\\n\"); return 3; }\n"
        << "  ktune_set_num_threads(2);\n"
        << "  pthread_t t; pthread_create(&t, NULL, other, NULL);\n"
        << "  int rc0 = " << name << "_run(ctx0, in, out0);\n"
        << "  void* rc1; pthread_join(t, &rc1);\n"
        << "  if (rc0 != 0 || rc1 != NULL) { fprintf(stderr, \"run failed %d\\n\", rc0); return 4; "
           "}\n"
        << "  if (memcmp(out0, out1, " << name
        << "_OUTPUT0_ELEMENTS * 4) != 0) { fprintf(stderr, \"contexts differ\\n\"); return 5; }\n"
        << "  f = fopen(argv[2], \"wb\"); fwrite(out0, 4, " << name
        << "_OUTPUT0_ELEMENTS, f); fclose(f);\n"
        << "  " << name << "_destroy(ctx0); " << name << "_destroy(ctx1);\n  return 0;\n}\n";
    const std::string exe = path("main");
    const auto r = shell(cc + " -O1 -std=c11 -I" + quote(dir_.string()) + " " + quote(c) + " " +
                         quote(path("runtime.c")) + " " + quote(path("lib" + name + ".a")) +
                         " -lm -lpthread -o " + quote(exe));
    EXPECT_EQ(r.status, 0) << r.err;
    return exe;
  }

  fs::path dir_;
};

TEST_F(ModelBuild, SmallCnnLinkedAndInProcessMatchOnnxRuntime) {
  const std::string onnx = model("small_cnn.onnx");
  const std::string in = inputs(16 * 16 * 16, 1);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 16u);

  const auto built =
      ktune("build --model " + quote(onnx) + " --untuned" + " -o " + quote(path("libnet.a")) +
                " --header " + quote(path("net.h")) + " --runtime " + quote(path("runtime.c")),
            true);
  ASSERT_EQ(built.status, 0) << built.err;
  EXPECT_NE(built.out.find("fallback"), std::string::npos) << built.out;
  const std::string exe = program("net", false);
  const auto ran = shell(quote(exe) + " " + quote(in) + " " + quote(path("out.bin")));
  ASSERT_EQ(ran.status, 0) << ran.err;
  const double linked = error(floats(path("out.bin")), ref);
  EXPECT_LE(linked, kTolerance);

  const auto jit =
      ktune("run " + quote(onnx) + " --untuned" + " --runs 2 --warmup 1 --input-file " + quote(in) +
                " --output-file " + quote(path("jit.bin")),
            true);
  ASSERT_EQ(jit.status, 0) << jit.err;
  const double in_process = error(floats(path("jit.bin")), ref);
  EXPECT_LE(in_process, kTolerance);
  EXPECT_NE(jit.out.find("latency: median"), std::string::npos) << jit.out;
  // The runs' quartiles lie between min and max around the median; noisy says whether their
  // middle half spreads past 25% of it.
  const auto timed = ktune("run " + quote(onnx) + " --untuned --runs 8 --json", true);
  ASSERT_EQ(timed.status, 0) << timed.err;
  const auto t = nlohmann::json::parse(timed.out);
  const double q1 = t["q1_ms"], q3 = t["q3_ms"], median = t["median_ms"];
  EXPECT_LE(t["min_ms"].get<double>(), q1);
  EXPECT_LE(q1, median);
  EXPECT_LE(median, q3);
  EXPECT_LE(q3, t["max_ms"].get<double>());
  EXPECT_EQ(t["noisy"].get<bool>(), (q3 - q1) / median > 0.25) << timed.out;
  // "apart": the median and the layers' sum more than 1.5x apart either way.
  double layers = 0;
  for (const auto& l : t["layers"]) layers += l["ms"].get<double>();
  EXPECT_EQ(t["apart"].get<bool>(), median > 1.5 * layers || layers > 1.5 * median) << timed.out;
  std::printf("small_cnn: max error against ONNX Runtime %.2e linked, %.2e in process\n", linked,
              in_process);
}

// `ktune run --serve` (a benchmark's estimate taken in its own rounds): "ready", then "ok" for a
// thread count and N positive sums for "N", and the outputs it leaves match ONNX Runtime's.
TEST_F(ModelBuild, RunServesLayerByLayerTimings) {
  const std::string onnx = model("small_cnn.onnx");
  const std::string in = inputs(16 * 16 * 16, 1);
  const auto served =
      shell("printf 'threads 1\\n3\\nthreads 2\\n2\\n' | " + std::string(KTUNE_BINARY) + " run " +
            quote(onnx) + " --untuned --input-file " + quote(in) + " --serve");
  ASSERT_EQ(served.status, 0) << served.out;
  std::istringstream lines(served.out);
  std::vector<std::string> got;
  for (std::string l; std::getline(lines, l);) got.push_back(l);
  ASSERT_EQ(got.size(), 5u) << served.out;
  EXPECT_EQ(got[0], "ready");
  EXPECT_EQ(got[1], "ok");
  EXPECT_EQ(got[3], "ok");
  for (const auto& [line, n] : {std::pair{got[2], 3}, std::pair{got[4], 2}}) {
    std::istringstream numbers(line);
    int count = 0;
    for (double ms; numbers >> ms; ++count) EXPECT_TRUE(ms > 0 && std::isfinite(ms)) << line;
    EXPECT_EQ(count, n) << line;
  }
  // Bad input: --serve with --json is refused in one line.
  const auto both = ktune("run " + quote(onnx) + " --untuned --serve --json", true);
  EXPECT_NE(both.status, 0);
}

// A 3x3 stride-1 conv whose Winograd alternative is tuned (and the direct conv not) runs as
// Winograd: its weights transformed at build time with the batch norm folded in, its epilogue
// (bias, residual, ReLU, ReLU6) fused. The linked program and `ktune run` match ONNX Runtime, and
// `ktune run --check-nodes` checks each Winograd step against the template's reference.
TEST_F(ModelBuild, WinogradLayersMatchOnnxRuntime) {
  struct Case {
    const char* model;
    int64_t input;
  };
  for (const Case& c :
       {Case{"small_cnn.onnx", 16 * 16 * 16}, Case{"small_mobile.onnx", 8 * 16 * 16}}) {
    const std::string onnx = model(c.model), log = path(std::string(c.model) + ".db");
    const auto listed = ktune("tasks --json " + quote(onnx), true);
    ASSERT_EQ(listed.status, 0) << listed.err;
    int64_t winograd = 0;  // occurrences that must run as Winograd
    const nlohmann::json tasks = nlohmann::json::parse(listed.out);
    for (const auto& t : tasks["tasks"]) {
      if (!t.contains("alternative_of")) continue;
      ASSERT_EQ(t["template"], "conv2d_winograd_nchwc") << t.dump();
      std::string args;
      for (const auto& [k, v] : t["args"].items()) args += " " + k + "=" + v.get<std::string>();
      const auto tuned = ktune(
          "tune conv2d_winograd_nchwc" + args + " --tuner random --trials 3 --db " + quote(log),
          true);
      ASSERT_EQ(tuned.status, 0) << tuned.err;
      winograd += t["count"].get<int64_t>();
    }
    ASSERT_GT(winograd, 0) << c.model;

    const std::string in = inputs(c.input, 5);
    const std::vector<float> ref = ort(onnx, in);
    const auto jit = ktune("run " + quote(onnx) + " --db " + quote(log) +
                               " --runs 1 --warmup 0 --json --input-file " + quote(in) +
                               " --output-file " + quote(path("jit.bin")),
                           true);
    ASSERT_EQ(jit.status, 0) << jit.err;
    int64_t ran_winograd = 0;
    const nlohmann::json timed = nlohmann::json::parse(jit.out);
    for (const auto& l : timed["layers"])
      ran_winograd += l["workload"].get<std::string>().rfind("conv2d_winograd_nchwc", 0) == 0;
    EXPECT_EQ(ran_winograd, winograd) << jit.out;
    const double in_process = error(floats(path("jit.bin")), ref);
    EXPECT_LE(in_process, kTolerance) << c.model;

    const auto built = ktune("build --model " + quote(onnx) + " --db " + quote(log) + " -o " +
                                 quote(path("libnet.a")) + " --header " + quote(path("net.h")) +
                                 " --runtime " + quote(path("runtime.c")),
                             true);
    ASSERT_EQ(built.status, 0) << built.err;
    const auto linked_run =
        shell(quote(program("net", false)) + " " + quote(in) + " " + quote(path("out.bin")));
    ASSERT_EQ(linked_run.status, 0) << linked_run.err;
    const double linked = error(floats(path("out.bin")), ref);
    EXPECT_LE(linked, kTolerance) << c.model;

    const auto nodes = ktune("run " + quote(onnx) + " --db " + quote(log) + " --check-nodes", true);
    EXPECT_EQ(nodes.status, 0) << nodes.out << nodes.err;
    std::printf(
        "%s: %lld Winograd layers, max error against ONNX Runtime %.2e linked, %.2e in "
        "process\n",
        c.model, static_cast<long long>(winograd), linked, in_process);
  }
}

// The CNN test models through `ktune run` (the same library, loaded in process): ResNet-18 and
// ResNet-50 (bottlenecks, strided 1x1 convs and projections), MobileNetV1 and V2 at 224 (BN folded,
// ReLU6 and residuals fused, depthwise blocked), a VGG-style net (conv + bias + Relu without BN,
// 2x2 max pools, a Gemm of K=12544 and two with Relu), a MobileNetV2 fragment and a model of every
// fused activation.
TEST_F(ModelBuild, EveryCnnTestModelMatchesOnnxRuntime) {
  struct Case {
    const char* model;
    int64_t input;
  };
  for (const Case& c :
       {Case{"small_mobile.onnx", 8 * 16 * 16}, Case{"mobilenetv2_frag.onnx", 3 * 224 * 224},
        Case{"resnet18.onnx", 3 * 224 * 224}, Case{"mobilenetv1.onnx", 3 * 224 * 224},
        Case{"mobilenetv2.onnx", 3 * 224 * 224}, Case{"resnet50.onnx", 3 * 224 * 224},
        Case{"vgg11_half.onnx", 3 * 224 * 224}}) {
    const std::string onnx = model(c.model);
    const std::string in = inputs(c.input, 3);
    const std::vector<float> ref = ort(onnx, in);
    const double err = error(run_in_process(onnx, in), ref);
    EXPECT_LE(err, kTolerance) << c.model;
    std::printf("%s: max error against ONNX Runtime %.2e\n", c.model, err);
  }
}

// The per-operator models (scripts/make-test-models, op_*): every operator is one `ktune tasks`
// lists with a generated kernel or as a task (none unsupported), and `ktune run --check` (in
// process, untuned) matches ONNX Runtime on every output, each within kTolerance of its magnitude.
TEST_F(ModelBuild, EveryOperatorTestModelMatchesOnnxRuntime) {
  for (const char* name :
       {"op_activations.onnx",      "op_binary.onnx",           "op_batchnorm.onnx",
        "op_concat_split_v13.onnx", "op_concat_split_v11.onnx", "op_slice_v13.onnx",
        "op_slice_v9.onnx",         "op_pad_v13.onnx",          "op_pad_v10.onnx",
        "op_gather.onnx",           "op_embedding.onnx",        "op_softmax_v13.onnx",
        "op_softmax_v11.onnx",      "op_reduce_v13.onnx",       "op_reduce_v11.onnx",
        "op_resize_v13.onnx",       "op_resize_v11.onnx",       "op_resize_v10.onnx",
        "op_resize_v9.onnx",        "op_matmul.onnx",           "op_clip_views_v13.onnx",
        "op_clip_views_v9.onnx",    "op_conv_general.onnx",     "op_conv_transpose.onnx",
        "op_opset18.onnx",          "op_opset21.onnx"}) {
    const std::string onnx = model(name);
    const auto tasks = ktune("tasks " + quote(onnx) + " --json", true);
    ASSERT_EQ(tasks.status, 0) << name << ": " << tasks.err;
    for (const auto& u : nlohmann::json::parse(tasks.out).at("unsupported"))
      EXPECT_TRUE(u.contains("generated")) << name << ": " << u.dump();
    const auto r = ktune("run " + quote(onnx) + " --untuned" +
                             " --runs 1 --warmup 0 --json --check --ort " + quote(KTUNE_ORT_DIR),
                         true);
    ASSERT_EQ(r.status, 0) << name << ": " << r.err;
    const nlohmann::json report = nlohmann::json::parse(r.out);
    EXPECT_TRUE(report.at("outputs_finite").get<bool>()) << name;
    const nlohmann::json errors = report.at("check_error");
    ASSERT_TRUE(errors.is_array() && !errors.empty()) << name;
    double largest = 0;
    for (size_t k = 0; k < errors.size(); ++k) {
      // NaN (an output never written) reads as null in JSON.
      const double e = errors[k].is_number() ? errors[k].get<double>() : INFINITY;
      EXPECT_LE(e, kTolerance) << name << " output " << k;
      largest = std::max(largest, e);
    }
    std::printf("%s: %zu outputs, max error against ONNX Runtime %.2e\n", name, errors.size(),
                largest);
  }
}

// The value of `#define <name>_<what> N` in a model header (the element counts of its inputs and
// outputs), or -1.
int64_t header_define(const std::string& header, const std::string& what) {
  std::ifstream in(header);
  const std::string key = "_" + what + " ";
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#define ", 0) == 0 && line.find(key) != std::string::npos &&
        line.find(key) + key.size() < line.size())
      return std::stoll(line.substr(line.find(key) + key.size()));
  return -1;
}

// Per-operator models through `ktune build --model` linked into a C program of every output (all
// in one buffer set, NaN-filled), for the host and, when the cross tools exist, for AArch64 under
// qemu: the object-code path (libm's logf and powf, the runtime's threads) of the generated
// kernels, each output within kTolerance of ONNX Runtime's.
// The C type of a built model's first input, from its header's prototype of net_run: float, or
// int64_t / int32_t (token ids).
std::string input_type(const std::string& header) {
  std::ifstream in(header);
  for (std::string line; std::getline(in, line);)
    if (line.find("net_run(") != std::string::npos)
      for (const char* type : {"int64_t", "int32_t"})
        if (line.find(std::string("const ") + type + "* INPUT0") != std::string::npos) return type;
  return "float";
}

// The models linked into C programs of every output (outputs NaN-filled), for the host and, with
// the cross compiler and qemu, for AArch64; each output against ONNX Runtime's. `models`: file
// and --input shape ("" = the model's own). A model of token ids reads ids below 50 (the corpus'
// smallest table).
void ModelBuild::linked_and_cross_built_match_ort(
    const std::vector<std::pair<std::string, std::string>>& models) {
  std::vector<std::pair<std::string, std::string>> targets = {{"host", "cc"}};
  if (std::system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && "
                  "command -v qemu-aarch64-static >/dev/null 2>&1") == 0)
    targets.push_back(
        {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "aarch64-linux-gnu-gcc -static"});
  for (const auto& [name, input] : models) {
    const std::string onnx = model(name);
    const std::string input_flag = input.empty() ? "" : " --input " + quote(input);
    for (const auto& [target, cc] : targets) {
      const auto built =
          ktune("build --model " + quote(onnx) + input_flag + " --untuned" + " --target " +
                    quote(target) + " --name net -o " + quote(path("libnet.a")) + " --header " +
                    quote(path("net.h")) + " --runtime " + quote(path("runtime.c")),
                true);
      ASSERT_EQ(built.status, 0) << name << " " << target << ": " << built.err;
      const int64_t outputs = header_define(path("net.h"), "NUM_OUTPUTS");
      ASSERT_GT(outputs, 0) << name;
      const std::string type = input_type(path("net.h"));
      std::vector<int64_t> sizes;
      std::string args, list;
      for (int64_t k = 0; k < outputs; ++k) {
        sizes.push_back(header_define(path("net.h"), "OUTPUT" + std::to_string(k) + "_ELEMENTS"));
        args += ", o[" + std::to_string(k) + "]";
        list += (k ? ", " : "") + std::string("net_OUTPUT") + std::to_string(k) + "_ELEMENTS";
      }
      std::ofstream(path("main.c"))
          << "#include <stdio.h>\n#include <stdlib.h>\n#include \"net.h\"\n"
          << "static float* buffer(long n) { return aligned_alloc(64, (n * 4 + 63) / 64 * 64); }\n"
          << "int main(int argc, char** argv) {\n  if (argc < 3) return 9;\n"
          << "  const long sizes[] = {" << list << "};\n  float* o[" << outputs << "];\n"
          << "  for (int k = 0; k < " << outputs << "; ++k) {\n    o[k] = buffer(sizes[k]);\n"
          << "    for (long i = 0; i < sizes[k]; ++i) o[k][i] = 0.0f / 0.0f;\n  }\n"
          << "  " << type
          << "* in = aligned_alloc(64, (net_INPUT0_ELEMENTS * sizeof *in + 63) / 64 "
          << "* 64);\n  FILE* f = fopen(argv[1], \"rb\");\n"
          << "  if (!f || fread(in, sizeof *in, net_INPUT0_ELEMENTS, f) != net_INPUT0_ELEMENTS) "
          << "return 8;\n"
          << "  fclose(f);\n  void* ctx = net_create();\n  ktune_set_num_threads(2);\n"
          << "  if (!ctx || net_run(ctx, in" << args << ") != 0) return 4;\n"
          << "  f = fopen(argv[2], \"wb\");\n"
          << "  for (int k = 0; k < " << outputs << "; ++k) fwrite(o[k], 4, sizes[k], f);\n"
          << "  fclose(f);\n  net_destroy(ctx);\n  return 0;\n}\n";
      const auto compiled =
          shell(cc + " -O1 -std=c11 -I" + quote(dir_.string()) + " " + quote(path("main.c")) + " " +
                    quote(path("runtime.c")) + " " + quote(path("libnet.a")) +
                    " -lm -lpthread -o " + quote(path("main")),
                true);
      ASSERT_EQ(compiled.status, 0) << name << " " << target << ": " << compiled.err;
      const int64_t elements = header_define(path("net.h"), "INPUT0_ELEMENTS");
      const std::string in =
          type == "float" ? inputs(elements, 5) : ids(elements, 50, type == "int64_t" ? 8 : 4, 5);
      const std::vector<float> ref = ort(onnx, in, input);
      fs::remove(path("out.bin"));
      const auto ran = shell((cc == "cc" ? "" : "qemu-aarch64-static ") + quote(path("main")) +
                                 " " + quote(in) + " " + quote(path("out.bin")),
                             true);
      ASSERT_EQ(ran.status, 0) << name << " " << target << ": " << ran.err;
      const std::vector<float> got = floats(path("out.bin"));
      ASSERT_EQ(got.size(), ref.size()) << name << " " << target;
      double largest = 0;
      size_t at = 0;
      std::string each;
      for (int64_t k = 0; k < outputs; ++k) {
        const size_t n = static_cast<size_t>(sizes[static_cast<size_t>(k)]);
        const double e = error({got.begin() + at, got.begin() + at + n},
                               {ref.begin() + at, ref.begin() + at + n});
        EXPECT_LE(e, kTolerance) << name << " " << target << " output " << k;
        largest = std::max(largest, e);
        char text[32];
        std::snprintf(text, sizeof text, "%s%.2e", k ? " " : "", e);
        each += text;
        at += n;
      }
      std::printf("%s linked for %s: %lld outputs, max error against ONNX Runtime %.2e (%s)\n",
                  name.c_str(), target.c_str(), static_cast<long long>(outputs), largest,
                  each.c_str());
    }
  }
}

TEST_F(ModelBuild, OperatorTestModelsLinkedAndCrossBuiltMatchOnnxRuntime) {
  linked_and_cross_built_match_ort({{"op_activations.onnx", ""},
                                    {"op_binary.onnx", ""},
                                    {"op_resize_v13.onnx", ""},
                                    {"op_softmax_v13.onnx", ""},
                                    {"op_gather.onnx", ""},
                                    {"op_embedding.onnx", ""},
                                    {"op_matmul.onnx", ""},
                                    {"op_conv_general.onnx", ""},
                                    {"op_conv_transpose.onnx", ""},
                                    {"op_opset21.onnx", ""}});
}

// The two smallest models of the exporter corpus (tf2onnx's 1-D audio CNN, paddle2onnx's text
// recognizer), their symbolic dimensions given with --input.
TEST_F(ModelBuild, SmallestCorpusModelsLinkedAndCrossBuiltMatchOnnxRuntime) {
  linked_and_cross_built_match_ort(
      {{"audio_cnn1d.onnx", "input_1:0=1x16000x1"}, {"text_rec.onnx", "x=1x3x32x320"}});
}

// small_qdq (QuantizeLinear on the input, five DQ -> Conv [-> Relu] -> Q blocks as int8 convs, a
// residual DQ + DQ -> Add -> Relu -> Q as a uint8 add, a final DQ and global pool): `ktune run`,
// `ktune run --check-nodes` (each step exactly its reference) and the linked C program; and
// resnet18_qdq through `ktune run` and linked (20 int8 convs, the 3-channel stem's padded to 4,
// uint8 adds, max pool and global pool (its Flatten a view), the Gemm as an int8 matmul). The int8
// kernels compute ONNX Runtime's QLinearConv / QGemm arithmetic (int32 accumulation, the float32
// product by s_x * s_w / s_y rounded half to even) and the uint8 add the float32 form of
// QLinearAdd: small_qdq's outputs differ only by the float32 sum order of the final pool
// (kTolerance). Where ONNX Runtime rounds otherwise (its QLinearAdd in fixed point, the global
// pool) a value may land one uint8 step apart, and what follows carries such a step on: one step in
// the pooled features moves every logit a little, so resnet18_qdq's output (the Gemm's uint8
// output, dequantized) may differ by one step of its DequantizeLinear's scale, never more, on up to
// 10% of its elements (none on this input).
TEST_F(ModelBuild, QdqModelsRunInt8AndMatchOnnxRuntime) {
  const std::string onnx = model("small_qdq.onnx");
  const std::string in = inputs(8 * 16 * 16, 3);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 24u);
  const double in_process = error(run_in_process(onnx, in), ref);
  EXPECT_LE(in_process, kTolerance);

  expect_steps_match_references(onnx);

  const double linked = error(run_linked(onnx, in), ref);
  EXPECT_LE(linked, kTolerance);
  std::printf("small_qdq: max error against ONNX Runtime %.2e linked, %.2e in process\n", linked,
              in_process);

  const std::string resnet = model("resnet18_qdq.onnx");
  const std::string resnet_in = inputs(3 * 224 * 224, 4);
  const std::vector<float> resnet_ref = ort(resnet, resnet_in);
  const auto listed = ktune("tasks " + quote(resnet), true);
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("matmul_u8s8s32(M=1,N=1000,K=512"), std::string::npos) << listed.out;
  // DQ -> GlobalAveragePool -> Flatten -> Q: the uint8 pool, the Flatten a view of its output.
  EXPECT_NE(listed.out.find("global_average_pool_u8"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("avg_pool2d"), std::string::npos) << listed.out;
  const Steps jit = steps_apart(run_in_process(resnet, resnet_in), resnet_ref);
  const Steps linked_steps = steps_apart(run_linked(resnet, resnet_in), resnet_ref);
  for (const Steps& s : {jit, linked_steps}) {
    EXPECT_LE(s.worst, 1.01);
    EXPECT_LE(s.apart, static_cast<int64_t>(resnet_ref.size()) / 10);
  }
  std::printf(
      "resnet18_qdq: %lld (in process) and %lld (linked) of %zu outputs one step (%.4f) from ONNX "
      "Runtime's, max %.2f and %.2f steps\n",
      static_cast<long long>(jit.apart), static_cast<long long>(linked_steps.apart),
      resnet_ref.size(), jit.step, jit.worst, linked_steps.worst);
}

// small_qop, the QOperator form (QLinearConv and QLinearMatMul nodes, a float residual Add between
// DequantizeLinear and QuantizeLinear): the same int8 kernels as the QDQ form, through `ktune run`,
// `ktune run --check-nodes` and the linked program. Its output is the QLinearMatMul's uint8 output
// dequantized: within one step of ONNX Runtime's, on at most 2 of its 24 elements.
TEST_F(ModelBuild, QOperatorModelRunsInt8AndMatchesOnnxRuntime) {
  const std::string onnx = model("small_qop.onnx");
  const std::string in = inputs(8 * 16 * 16, 3);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 24u);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);

  expect_steps_match_references(onnx);

  const Steps linked = steps_apart(run_linked(onnx, in), ref);
  for (const Steps& s : {jit, linked}) {
    EXPECT_LE(s.worst, 1.01);
    EXPECT_LE(s.apart, 2);
  }
  std::printf(
      "small_qop: %lld (in process) and %lld (linked) of 24 outputs one step from ONNX "
      "Runtime's, max %.2f and %.2f steps\n",
      static_cast<long long>(jit.apart), static_cast<long long>(linked.apart), jit.worst,
      linked.worst);
}

// qdq_mobile, a quantized MobileNet-like block: the depthwise convs as
// depthwise_conv2d_nchwc_u8s8s32 (24 channels: a partial block of 16), the residual Add as a
// uint8 add. Its output is the add's uint8
// output dequantized: within one step of ONNX Runtime's (whose QLinearAdd rounds in fixed point),
// on at most 2% of the elements; each step exactly its reference (`ktune run --check-nodes`).
TEST_F(ModelBuild, QdqDepthwiseRunsInt8AndMatchesOnnxRuntime) {
  const std::string onnx = model("qdq_mobile.onnx");
  const auto listed = ktune("tasks " + quote(onnx), true);
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("depthwise_conv2d_nchwc_u8s8s32(N=1,C=24,H=16,W=16"), std::string::npos)
      << listed.out;
  const std::string in = inputs(16 * 16 * 16, 7);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 16u * 8 * 8);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);
  expect_steps_match_references(onnx);
  const Steps linked = steps_apart(run_linked(onnx, in), ref);
  for (const Steps& s : {jit, linked}) {
    EXPECT_LE(s.worst, 1.01);
    EXPECT_LE(s.apart, static_cast<int64_t>(ref.size()) / 50);
  }
  std::printf(
      "qdq_mobile: %lld (in process) and %lld (linked) of %zu outputs one step (%.4f) from ONNX "
      "Runtime's, max %.2f and %.2f steps\n",
      static_cast<long long>(jit.apart), static_cast<long long>(linked.apart), ref.size(), jit.step,
      jit.worst, linked.worst);
}

// qdq_mobile_zp_wide and qop_mobile_zp_wide: depthwise convs (24 channels, stride 1 and 2) whose
// uint8 weights less their zero point are past int8, of one zero point (122) and of one per
// channel, in QDQ and QOperator form. `ktune tasks` lists both as depthwise_conv2d_nchwc_u8s8s32
// with weights=s16 (no conv left in float32); through `ktune run`, `--check-nodes` and the linked
// program the output within one step of ONNX Runtime's on at most 2% of the elements.
TEST_F(ModelBuild, DepthwiseWeightsPastInt8RunInt16AndMatchOnnxRuntime) {
  for (const char* name : {"qdq_mobile_zp_wide.onnx", "qop_mobile_zp_wide.onnx"}) {
    const std::string onnx = model(name);
    const auto listed = ktune("tasks " + quote(onnx), true);
    ASSERT_EQ(listed.status, 0) << listed.err;
    for (const char* stride : {"1", "2"}) {
      const size_t at = listed.out.find(
          std::string("depthwise_conv2d_nchwc_u8s8s32(N=1,C=24,H=16,W=16,R=3,S=3,stride=") +
          stride + ",pad=1,");
      ASSERT_NE(at, std::string::npos) << name << " stride " << stride << "\n" << listed.out;
      const size_t end = listed.out.find(')', at);
      EXPECT_NE(listed.out.substr(at, end - at).find(",weights=s16"), std::string::npos)
          << name << "\n"
          << listed.out;
    }
    EXPECT_NE(listed.out.find("weights less their zero point past int8, taken as int16"),
              std::string::npos)
        << listed.out;
    EXPECT_EQ(listed.out.find("float32, not int8"), std::string::npos) << listed.out;
    const std::string in = inputs(16 * 16 * 16, 12);
    const std::vector<float> ref = ort(onnx, in);
    ASSERT_EQ(ref.size(), 16u * 8 * 8) << name;
    const Steps jit = steps_apart(run_in_process(onnx, in), ref);
    expect_steps_match_references(onnx);
    const Steps linked = steps_apart(run_linked(onnx, in), ref);
    for (const Steps& st : {jit, linked}) {
      EXPECT_LE(st.worst, 1.01) << name;
      EXPECT_LE(st.apart, static_cast<int64_t>(ref.size()) / 50) << name;
    }
    std::printf(
        "%s: %lld (in process) and %lld (linked) of %zu outputs one step (%.4f) from ONNX "
        "Runtime's, max %.2f and %.2f steps\n",
        name, static_cast<long long>(jit.apart), static_cast<long long>(linked.apart), ref.size(),
        jit.step, jit.worst, linked.worst);
  }
}

// qdq_s8_bias: a float32 bias (rounded to the accumulator's scale) and an int8 output
// (requantized to int8, then a generated DequantizeLinear of int8). Within one step of ONNX
// Runtime's output on at most 2% of the elements; each step exactly its reference.
TEST_F(ModelBuild, QdqFloatBiasAndInt8OutputMatchOnnxRuntime) {
  const std::string onnx = model("qdq_s8_bias.onnx");
  const std::string in = inputs(8 * 8 * 8, 8);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 16u * 8 * 8);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);
  expect_steps_match_references(onnx);
  EXPECT_LE(jit.worst, 1.01);
  EXPECT_LE(jit.apart, static_cast<int64_t>(ref.size()) / 50);
  std::printf("qdq_s8_bias: %lld of %zu outputs one step (%.4f) from ONNX Runtime's, max %.2f\n",
              static_cast<long long>(jit.apart), ref.size(), jit.step, jit.worst);
}

// qop_contrib: ONNX Runtime's contrib QLinearAdd and QLinearGlobalAveragePool as generated uint8
// kernels. ONNX Runtime adds in fixed point and ktune in float32: a sum one step apart moves the
// pooled mean by a 64th of a step, so the output is within one step of ONNX Runtime's, on at
// most 2 of its 24 elements; each step exactly its reference.
TEST_F(ModelBuild, ContribQLinearAddAndGlobalPoolMatchOnnxRuntime) {
  const std::string onnx = model("qop_contrib.onnx");
  const std::string in = inputs(24 * 8 * 8, 9);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 24u);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);
  expect_steps_match_references(onnx);
  EXPECT_LE(jit.worst, 1.01);
  EXPECT_LE(jit.apart, 2);
  std::printf("qop_contrib: %lld of 24 outputs one step (%.4f) from ONNX Runtime's, max %.2f\n",
              static_cast<long long>(jit.apart), jit.step, jit.worst);
}

// qdq_zp and qop_zp: weights with zero points other than 0 (uint8 of zero point 128, int8 and uint8
// with one per channel) as int8 kernels on the weights less their zero point; in qdq_zp also a
// uint8 DQ -> GlobalAveragePool -> Q and a conv whose uint8 weights leave int8 of their zero point
// (weights less 128 and the input window sums). qdq_zp_wide and qop_zp_wide: only such weights
// (two convs, one of 6 input channels and one of stride 2, and a matrix product: window and row
// sums), in QDQ and QOperator form. qdq_zp_channels: zero points per channel spread over [28, 227]
// that fit int8 channel by channel only. Through `ktune run`, `--check-nodes` and the linked
// program: the output (the matrix product's uint8 output dequantized) within one step of ONNX
// Runtime's, on at most 2 of its 24 elements.
TEST_F(ModelBuild, WeightZeroPointsRunInt8AndMatchOnnxRuntime) {
  for (const char* name : {"qdq_zp.onnx", "qop_zp.onnx", "qdq_zp_wide.onnx", "qop_zp_wide.onnx",
                           "qdq_zp_channels.onnx"}) {
    const std::string onnx = model(name);
    const std::string in =
        inputs((std::string(name).find("wide") != std::string::npos ? 6 : 8) * 8 * 8, 10);
    const std::vector<float> ref = ort(onnx, in);
    ASSERT_EQ(ref.size(), 24u) << name;
    const Steps jit = steps_apart(run_in_process(onnx, in), ref);
    expect_steps_match_references(onnx);
    const Steps linked = steps_apart(run_linked(onnx, in), ref);
    for (const Steps& s : {jit, linked}) {
      EXPECT_LE(s.worst, 1.01) << name;
      EXPECT_LE(s.apart, 2) << name;
    }
    std::printf(
        "%s: %lld (in process) and %lld (linked) of 24 outputs one step (%.4f) from ONNX "
        "Runtime's, max %.2f and %.2f steps\n",
        name, static_cast<long long>(jit.apart), static_cast<long long>(linked.apart), jit.step,
        jit.worst, linked.worst);
  }
}

// qdq_pool_view: DQ -> GlobalAveragePool -> Reshape [1, 40] -> Q as the uint8 pool, whose 40
// channels (two and a half blocks of 16) the Reshape reads as rows without a copy, into a uint8
// MatMul. Its output (the matrix product's uint8 output dequantized) within one step of ONNX
// Runtime's on at most 2 of its 24 elements; each step exactly its reference.
TEST_F(ModelBuild, PoolBeforeAViewRunsUint8AndMatchesOnnxRuntime) {
  const std::string onnx = model("qdq_pool_view.onnx");
  const auto listed = ktune("tasks " + quote(onnx), true);
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("global_average_pool_u8"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("avg_pool2d"), std::string::npos) << listed.out;
  const std::string in = inputs(8 * 8 * 8, 11);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 24u);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);
  expect_steps_match_references(onnx);
  const Steps linked = steps_apart(run_linked(onnx, in), ref);
  for (const Steps& s : {jit, linked}) {
    EXPECT_LE(s.worst, 1.01);
    EXPECT_LE(s.apart, 2);
  }
  std::printf(
      "qdq_pool_view: %lld (in process) and %lld (linked) of 24 outputs one step (%.4f) from ONNX "
      "Runtime's, max %.2f and %.2f steps\n",
      static_cast<long long>(jit.apart), static_cast<long long>(linked.apart), jit.step, jit.worst,
      linked.worst);
}

// qdq_per_axis: the input quantized and dequantized per channel (generated kernels reading their
// scales and zero points per channel), then DQ(w) -> Conv -> Relu -> Q -> DQ, whose data is not the
// int8 kernel's per-tensor data: `ktune tasks` says why the conv runs in float32, and `ktune run`
// matches ONNX Runtime (which runs the float path too) within one output step on at most 1% of the
// elements (a float sum order that rounds a value near a half the other way).
TEST_F(ModelBuild, PerAxisQdqRunsInFloatAndMatchesOnnxRuntime) {
  const std::string onnx = model("qdq_per_axis.onnx");
  const auto listed = ktune("tasks --json " + quote(onnx), true);
  ASSERT_EQ(listed.status, 0) << listed.err;
  const nlohmann::json tasks = nlohmann::json::parse(listed.out);
  ASSERT_GE(tasks["tasks"].size(), 1u) << listed.out;  // and its Winograd alternative
  EXPECT_EQ(tasks["tasks"][0]["template"], "conv2d_nchwc");
  EXPECT_EQ(tasks["tasks"][0]["note"],
            "float32, not int8: the data's scale or zero point is not one value (per-axis data)");
  const std::string in = inputs(8 * 8 * 8, 6);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 16u * 8 * 8);
  const Steps jit = steps_apart(run_in_process(onnx, in), ref);
  EXPECT_LE(jit.worst, 1.01);
  EXPECT_LE(jit.apart, static_cast<int64_t>(ref.size()) / 100);
  std::printf("qdq_per_axis: %lld of %zu outputs one step from ONNX Runtime's, max %.2f steps\n",
              static_cast<long long>(jit.apart), ref.size(), jit.worst);
}

// One BERT encoder layer (attention with a mask, decomposed LayerNorms, Erf-form GELU) at 1x8x32:
// batch_matmul tasks, generated Softmax, LayerNorm, Transpose and broadcasting kernels, GELU fused
// into the FFN matmul.
TEST_F(ModelBuild, TinyBertLinkedAndInProcessMatchOnnxRuntime) {
  const std::string onnx = model("tiny_bert.onnx");
  const std::string in = inputs(8 * 32, 3);
  const std::vector<float> ref = ort(onnx, in);
  ASSERT_EQ(ref.size(), 8u * 32u);

  const auto built = ktune("build --model " + quote(onnx) + " --untuned -o " +
                               quote(path("libbert.a")) + " --header " + quote(path("bert.h")) +
                               " --name bert --runtime " + quote(path("runtime.c")),
                           true);
  ASSERT_EQ(built.status, 0) << built.err;
  const std::string exe = program("bert", false);
  const auto ran = shell(quote(exe) + " " + quote(in) + " " + quote(path("out.bin")));
  ASSERT_EQ(ran.status, 0) << ran.err;
  const double linked = error(floats(path("out.bin")), ref);
  EXPECT_LE(linked, kTolerance);

  const auto checked = ktune("run " + quote(onnx) + " --untuned" +
                                 " --runs 2 --warmup 1 --check --ort " + quote(KTUNE_ORT_DIR),
                             true);
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
  const auto jit =
      ktune("run " + quote(onnx) + " --untuned" + " --runs 1 --warmup 0 --input-file " + quote(in) +
                " --output-file " + quote(path("jit.bin")),
            true);
  ASSERT_EQ(jit.status, 0) << jit.err;
  const double in_process = error(floats(path("jit.bin")), ref);
  EXPECT_LE(in_process, kTolerance);
  std::printf("tiny_bert: max error against ONNX Runtime %.2e linked, %.2e in process\n", linked,
              in_process);
}

// True when every object in the ar archive `file` is an ELF file for AArch64 (e_machine 183,
// little-endian at byte 18) and there is at least one; the symbol index ("/") is skipped.
bool archive_is_aarch64(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.rfind("!<arch>\n", 0) != 0) return false;
  int objects = 0;
  for (size_t at = 8; at + 60 <= bytes.size();) {
    const std::string name = bytes.substr(at, 16);
    const size_t size = std::stoul(bytes.substr(at + 48, 10));
    const std::string data = bytes.substr(at + 60, size);
    if (name.rfind("/ ", 0) != 0 && name.rfind("// ", 0) != 0) {
      if (data.size() < 20 ||
          data.rfind("\x7f"
                     "ELF",
                     0) != 0 ||
          (static_cast<unsigned char>(data[18]) | static_cast<unsigned char>(data[19]) << 8) != 183)
        return false;
      ++objects;
    }
    at += 60 + size + (size % 2);
  }
  return objects > 0;
}

// A whole model cross-built for AArch64 (its kernels and entry points from LLVM, no C compiler at
// build time), linked statically by the cross compiler, run under qemu; its outputs against ONNX
// Runtime's on the host, from the same inputs. Both contexts of the program on two threads.
TEST_F(ModelBuild, ModelsCrossBuiltForAArch64MatchOnnxRuntime) {
  if (std::system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && "
                  "command -v qemu-aarch64-static >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "no aarch64-linux-gnu-gcc or qemu-aarch64-static: nothing to run the AArch64 build on";
  const std::string target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  struct Case {
    const char* model;
    int64_t input, output;
  };
  for (const Case& c :
       {Case{"small_cnn.onnx", 16 * 16 * 16, 16}, Case{"tiny_bert.onnx", 8 * 32, 8 * 32}}) {
    const std::string onnx = model(c.model);
    const std::string in = inputs(c.input, 4);
    const std::vector<float> ref = ort(onnx, in);
    ASSERT_EQ(ref.size(), static_cast<size_t>(c.output)) << c.model;
    const auto built =
        ktune("build --model " + quote(onnx) + " --untuned --target " + quote(target) +
                  " --name net -o " + quote(path("libnet.a")) + " --header " +
                  quote(path("net.h")) + " --runtime " + quote(path("runtime.c")),
              true);
    ASSERT_EQ(built.status, 0) << c.model << ": " << built.err;
    EXPECT_TRUE(archive_is_aarch64(path("libnet.a"))) << c.model;
    const std::string exe = program("net", false, "aarch64-linux-gnu-gcc -static");
    fs::remove(path("out.bin"));
    const auto ran =
        shell("qemu-aarch64-static " + quote(exe) + " " + quote(in) + " " + quote(path("out.bin")));
    ASSERT_EQ(ran.status, 0) << c.model << ": " << ran.err;
    const double err = error(floats(path("out.bin")), ref);
    EXPECT_LE(err, kTolerance) << c.model;
    std::printf("%s on AArch64 (qemu): max error against ONNX Runtime %.2e\n", c.model, err);
  }
}

// Quantized models cross-built for Cortex-A76 (AArch64 dotprod): the int8 kernels take
// shift_data (sdot of the data less 128, the compensation folded into the packed bias), run
// under qemu; their dequantized outputs within one step of ONNX Runtime's on the host, as the
// host builds' are (qdq_mobile: depthwise, 1x1 and 3x3 convs; small_qop: QLinearConv and
// QLinearMatMul). The depthwise convs of qdq_mobile_zp_wide and qop_mobile_zp_wide take int16
// weights (weights=s16, widening code without shift_data) and match as well.
TEST_F(ModelBuild, QuantizedModelsCrossBuiltForDotprodMatchOnnxRuntime) {
  if (std::system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && "
                  "command -v qemu-aarch64-static >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "no aarch64-linux-gnu-gcc or qemu-aarch64-static: nothing to run the AArch64 build on";
  const std::string target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76";
  struct Case {
    const char* model;
    const char* task;  // a task the model lists, with shift_data or (s16) weights=s16
    int64_t input, output, apart;
    bool s16 = false;
  };
  const char* const depthwise = "depthwise_conv2d_nchwc_u8s8s32(N=1,C=24,H=16,W=16";
  for (const Case& c :
       {Case{"qdq_mobile.onnx", depthwise, 16 * 16 * 16, 16 * 8 * 8, 16 * 8 * 8 / 50},
        Case{"small_qop.onnx", "matmul_u8s8s32(", 8 * 16 * 16, 24, 2},
        Case{"qdq_mobile_zp_wide.onnx", depthwise, 16 * 16 * 16, 16 * 8 * 8, 16 * 8 * 8 / 50, true},
        Case{"qop_mobile_zp_wide.onnx", depthwise, 16 * 16 * 16, 16 * 8 * 8, 16 * 8 * 8 / 50,
             true}}) {
    const std::string onnx = model(c.model);
    const auto listed = ktune("tasks " + quote(onnx) + " --target " + quote(target), true);
    ASSERT_EQ(listed.status, 0) << listed.err;
    const size_t at = listed.out.find(c.task);
    ASSERT_NE(at, std::string::npos) << listed.out;
    const std::string key = listed.out.substr(at, listed.out.find(')', at) - at);
    EXPECT_EQ(key.find("shift_data=1") != std::string::npos, !c.s16) << key;
    EXPECT_EQ(key.find("weights=s16") != std::string::npos, c.s16) << key;
    const std::string in = inputs(c.input, 5);
    const std::vector<float> ref = ort(onnx, in);
    ASSERT_EQ(ref.size(), static_cast<size_t>(c.output)) << c.model;
    const auto built =
        ktune("build --model " + quote(onnx) + " --untuned --target " + quote(target) +
                  " --name net -o " + quote(path("libnet.a")) + " --header " +
                  quote(path("net.h")) + " --runtime " + quote(path("runtime.c")),
              true);
    ASSERT_EQ(built.status, 0) << c.model << ": " << built.err;
    const std::string exe = program("net", false, "aarch64-linux-gnu-gcc -static");
    fs::remove(path("out.bin"));
    const auto ran =
        shell("qemu-aarch64-static " + quote(exe) + " " + quote(in) + " " + quote(path("out.bin")));
    ASSERT_EQ(ran.status, 0) << c.model << ": " << ran.err;
    const Steps s = steps_apart(floats(path("out.bin")), ref);
    EXPECT_LE(s.worst, 1.01) << c.model;
    EXPECT_LE(s.apart, c.apart) << c.model;
    std::printf(
        "%s on Cortex-A76 (qemu): %lld of %zu outputs one step (%.4f) from ONNX Runtime's, "
        "max %.2f steps\n",
        c.model, static_cast<long long>(s.apart), ref.size(), s.step, s.worst);
  }
}

TEST_F(ModelBuild, ExternalWeightsFileIsCheckedByHash) {
  const std::string onnx = model("small_cnn.onnx");
  const std::string in = inputs(16 * 16 * 16, 2);
  const std::vector<float> ref = ort(onnx, in);
  const auto built =
      ktune("build --model " + quote(onnx) + " --untuned -o " + quote(path("libnet.a")) +
                " --header " + quote(path("net.h")) + " --runtime " + quote(path("runtime.c")) +
                " --weights " + quote(path("net.weights")),
            true);
  ASSERT_EQ(built.status, 0) << built.err;
  ASSERT_TRUE(fs::exists(path("net.weights")));
  const std::string exe = program("net", true);
  auto ran = shell(quote(exe) + " " + quote(in) + " " + quote(path("out.bin")) + " " +
                   quote(path("net.weights")));
  ASSERT_EQ(ran.status, 0) << ran.err;
  EXPECT_LE(error(floats(path("out.bin")), ref), kTolerance);

  // One byte changed, one byte more, a missing file: create refuses each (NULL).
  std::string bytes;
  {
    std::ifstream w(path("net.weights"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(w), {});
  }
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(path("flipped.weights"), std::ios::binary) << bytes;
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(path("longer.weights"), std::ios::binary) << bytes << 'x';
  for (const char* w : {"flipped.weights", "longer.weights", "missing.weights"}) {
    ran = shell(quote(exe) + " " + quote(in) + " " + quote(path("out.bin")) + " " + quote(path(w)));
    EXPECT_EQ(ran.status, 3) << w << ": " << ran.err;
  }
}

TEST_F(ModelBuild, BadInputIsOneLineAndWritesNothing) {
  struct Case {
    std::string model, extra, text;
  };
  const std::vector<Case> cases = {
      {"blocked_ops.onnx", "", "node '"},        // operators without a path
      {"resnet18_dynamic.onnx", "", "--input"},  // a symbolic batch dimension
      {"not_onnx.onnx", "", "not an ONNX model"},
      {"truncated.onnx", "", "truncated.onnx"},
      {"small_cnn.onnx", " --name 9lives", "not a C identifier"},
      // A weight zero point of int8 for uint8 weights, and of 3 values for 16 channels.
      {"qop_zp_type.onnx", "", "qlinearconv_"},
      {"qop_zp_shape.onnx", "", "node 'qlinearconv_"},
  };
  for (const Case& c : cases) {
    const auto r = ktune("build --model " + quote(model(c.model)) + c.extra + " --untuned -o " +
                             quote(path("libm.a")) + " --header " + quote(path("m.h")),
                         true);
    testing_cli::expect_one_line_error(r, c.text);
    EXPECT_FALSE(fs::exists(path("libm.a"))) << c.model;
    EXPECT_FALSE(fs::exists(path("m.h"))) << c.model;
    const auto run = ktune("run " + quote(model(c.model)) + c.extra + " --untuned", true);
    if (c.extra.empty()) testing_cli::expect_one_line_error(run, c.text);
  }
}

// A log that does not exist is an error (a typo must not ship untuned kernels); a log without
// records of the model builds, says on stderr that most kernels run untuned configs, and counts
// kernels that add up, as does a log whose best records are the fallback configs; --untuned asks
// for the fallbacks and gets no warning.
TEST_F(ModelBuild, AMissingLogIsAnErrorAndAMostlyUntunedBuildSaysSo) {
  const std::string onnx = quote(model("small_cnn.onnx"));
  const std::string outs = " -o " + quote(path("libm.a")) + " --header " + quote(path("m.h"));
  const auto missing =
      ktune("build --model " + onnx + " --db " + quote(path("no.db")) + outs, true);
  testing_cli::expect_one_line_error(missing, "no tuning log at " + path("no.db"));
  EXPECT_FALSE(fs::exists(path("libm.a")));
  EXPECT_FALSE(fs::exists(path("no.db"))) << "a read-only use creates no log";
  testing_cli::expect_one_line_error(
      ktune("run " + onnx + " --db " + quote(path("no.db")) + " --runs 1", true), "--untuned");

  // A log of another workload only.
  ASSERT_EQ(
      ktune("tune matmul M=8 N=8 K=8 --trials 2 --tuner random --db " + quote(path("other.db")),
            true)
          .status,
      0);
  // The tune-model it suggests repeats the model's --input shapes (a symbolic model needs them).
  const auto other = ktune("build --model " + onnx + " --input input=1x16x16x16 --db " +
                               quote(path("other.db")) + outs + " --json",
                           true);
  ASSERT_EQ(other.status, 0) << other.err;
  const auto j = nlohmann::json::parse(other.out);
  EXPECT_EQ(j["tuned"].get<int>() + j["nearest"].get<int>() + j["fallback"].get<int>() +
                j["generated"].get<int>(),
            j["kernels"].get<int>());
  EXPECT_EQ(j["tuned"], 0);
  EXPECT_EQ(j["name"], "m");  // libNAME.a's NAME prefixes the C API
  EXPECT_TRUE(contains(other.err, "3 of the 3 tunable kernels run untuned configs")) << other.err;
  // A NAME that cannot start a C identifier (lib32.a): the model file's name instead.
  const auto digits = ktune("build --model " + onnx + " --untuned --json -o " +
                                quote(path("lib32.a")) + " --header " + quote(path("m32.h")),
                            true);
  ASSERT_EQ(digits.status, 0) << digits.err;
  EXPECT_EQ(nlohmann::json::parse(digits.out)["name"], "small_cnn") << digits.out;
  EXPECT_TRUE(contains(other.err, "`ktune tune-model " + model("small_cnn.onnx") +
                                      " --input input=1x16x16x16 --db "))
      << other.err;

  // A log whose only records of the model are its tasks' fallback configs (a brief run's log,
  // without the trials): every step is "tuned" on the fallback config, which the warning counts.
  ASSERT_EQ(
      ktune("tune-model " + onnx + " --trials 1 --no-libraries --db " + quote(path("brief.db")),
            true)
          .status,
      0);
  const auto exported = ktune("db export --db " + quote(path("brief.db")), true);
  ASSERT_EQ(exported.status, 0) << exported.err;
  {
    std::ofstream fallbacks(path("fallbacks.jsonl"));
    std::istringstream lines(exported.out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && nlohmann::json::parse(line)["meta"].value("tuner", "") == "fallback")
        fallbacks << line << "\n";
  }
  ASSERT_EQ(
      ktune("db import " + quote(path("fallbacks.jsonl")) + " --db " + quote(path("fallbacks.db")),
            true)
          .status,
      0);
  const auto on_fallbacks = ktune(
      "build --model " + onnx + " --db " + quote(path("fallbacks.db")) + outs + " --json", true);
  ASSERT_EQ(on_fallbacks.status, 0) << on_fallbacks.err;
  const auto f = nlohmann::json::parse(on_fallbacks.out);
  EXPECT_EQ(f["tuned"], 3) << on_fallbacks.out;
  EXPECT_EQ(f["tuned_fallback_config"], 3) << on_fallbacks.out;
  EXPECT_TRUE(contains(on_fallbacks.err,
                       "3 of the 3 tunable kernels run untuned configs (0 fallback, 0 of the "
                       "nearest tuned shape, 3 whose best record is the fallback config"))
      << on_fallbacks.err;
  EXPECT_TRUE(contains(on_fallbacks.err, "with more trials tunes them")) << on_fallbacks.err;
  {
    std::ifstream header(path("m.h"));
    const std::string text((std::istreambuf_iterator<char>(header)), {});
    EXPECT_TRUE(contains(text, "[tuned: the fallback config]")) << text;
    EXPECT_FALSE(contains(text, "[tuned]")) << text;
  }

  const auto untuned = ktune("build --model " + onnx + " --untuned" + outs, true);
  ASSERT_EQ(untuned.status, 0) << untuned.err;
  EXPECT_EQ(untuned.err, "");
  EXPECT_TRUE(
      contains(untuned.out, "6 kernels (0 tuned, 0 nearest tuned shape, 3 fallback, 3 generated)"))
      << untuned.out;
}

}  // namespace
}  // namespace ktune
