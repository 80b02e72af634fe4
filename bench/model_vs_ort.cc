// model_vs_ort: whole models built by `ktune build --model` (linked into a C program with the
// standalone runtime) against ONNX Runtime 1.30 (npm onnxruntime-node, CPU) on the same machine,
// the same input and the same thread count, timed in interleaved rounds. Each model is first
// tuned by `ktune tune-model` with the stated budget (a log already in --db-dir is reused).
// The quantized models (--int8-models: ResNet-18 in ONNX Runtime's QDQ form, whose convs and Gemm
// ktune runs as int8 kernels) run the same way, ONNX Runtime on the same QDQ file (its QLinearConv
// and QGemm kernels).
//
// --models corpus names the exporter-faithful corpus of make-test-models (torch.onnx, paddle2onnx,
// tf2onnx forms), each measured at the input shape kCorpusInputs gives its symbolic dimensions;
// for each, the share of the built model's time in generated (untuned) kernels, from `ktune run
// --json`, and the last line model_over_ort_corpus, the geometric mean over the corpus models and
// thread counts.
//
//   build/bench/model_vs_ort [--models resnet18,mobilenetv2,bert_layer] [--threads 1,2]
//                            [--int8-models resnet18_qdq] [--trials 4000] [--time-budget 7]
//                            [--flush-cache bert_layer] [--db-dir DIR] [--rounds 15] [--runs 4]
//
// The budget is --trials new configs or --time-budget minutes of search, whichever ends first
// (tune-model --time-budget; the re-timing of the best configs and the built model's timing follow
// it): the figure printed is tune-model's whole wall time.
// --flush-cache names the models tuned with `tune-model --flush-cache` ("none" for none): the BERT
// layer by default. Its matmuls read 28 MB of weights per run, which a model run finds in memory,
// not in cache; kernels timed warm pick tiles whose strided reads of a cold B stall (the tuned
// 128x768x3072 product ran 1.8x slower with B evicted, OpenBLAS's, which packs B, 1.07x), and the
// layer ran 5.2-5.3 ms at two threads tuned cold against 5.6-5.9 tuned warm. MobileNetV2 (small
// weights, activations hot from the layer before) lost with it: 1.74-1.85 ms against 1.56.
//
// Prints per model and thread count (and after them the model's "ktune/ORT geomean" over its
// thread counts): ktune's and ONNX Runtime's median latency, their ratio,
// the outputs' max difference relative to ONNX Runtime's magnitude, the linked program's median
// of back-to-back runs ("steady") and the estimate of it: tune-model's estimate (the built model's
// kernels timed one by one in the model's order, summed) taken again in every round by `ktune run
// --serve` on the same log, right after the steady runs, so that run/est compares what the
// estimate counts with what the linked program runs and not two moments of the host (a two-thread
// run on this VM moves by 10-20% as the host moves its vCPUs: the inter-core round trip is printed
// before and after each model's two-thread rounds, bench/core_latency.h). run/alone compares the
// steady median with the tuned kernels timed alone (warm caches, as tuning times them) plus the
// layout and generated ones, at the thread count tune-model ran at. After each model: tune-model's
// wall time and trials, and its own estimate and run at the end of tuning.
// The line run_over_estimate gives the range of run/est over the models and thread counts.
// Then model_over_ort_int8, the geometric mean of ktune latency / ONNX Runtime latency over the
// quantized models and thread counts. Last line: model_over_ort, the same over every float model
// and thread count (below 1: ktune faster).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/core_latency.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its stdout, or exits the benchmark with its output on failure.
std::string run(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = p ? ::pclose(p) : -1;
  if (status != 0) {
    std::cerr << "model_vs_ort: failed: " << cmd << "\n" << out;
    std::exit(1);
  }
  return out;
}

// The input each model of the exporter corpus is measured at: its dimensions are symbolic, as
// the exporters write them.
const std::map<std::string, std::string> kCorpusInputs = {
    {"mobilenetv3_small", "input=1x3x224x224"}, {"mobilenetv3_large", "x=1x3x224x224"},
    {"efficientnet_b0", "input=1x3x224x224"},   {"text_det_fpn", "x=1x3x320x320"},
    {"yolo_neck", "images=1x3x256x256"},        {"text_rec", "x=1x3x32x320"},
    {"audio_cnn1d", "input_1:0=1x16000x1"},     {"vit_tiny_block", "input=1x3x224x224"},
    {"efficientnet_b0_dynamo", "x=1x3x224x224"}};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, sep);)
    if (!p.empty()) parts.push_back(p);
  return parts;
}

// A child process that answers a line "N" on stdin with N run times (ms) on one line of stdout.
// (`ktune run --serve` answers with N layer-by-layer runs' sums.)
class Peer {
 public:
  explicit Peer(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) std::exit(1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) {
      std::cerr << "model_vs_ort: cannot start " << argv[0] << "\n";
      std::exit(1);
    }
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(out[0], "r");
    if (line() != "ready") {
      std::cerr << "model_vs_ort: " << argv[0] << " did not start\n";
      std::exit(1);
    }
  }
  ~Peer() {
    std::fclose(to_);
    std::fclose(from_);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  // For `ktune run --serve`: the thread count of the runs that follow.
  void threads(int t) {
    std::fprintf(to_, "threads %d\n", t);
    std::fflush(to_);
    if (line() != "ok") std::exit(1);
  }
  std::vector<double> time(int runs) {
    std::fprintf(to_, "%d\n", runs);
    std::fflush(to_);
    std::vector<double> ms;
    for (const auto& t : split(line(), ' ')) ms.push_back(std::stod(t));
    return ms;
  }

 private:
  std::string line() {
    std::string s;
    for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) s += static_cast<char>(c);
    return s;
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

// The C program that runs the built model of `outputs` outputs: the input from a file, the outputs
// written once, concatenated in order (what is compared with ONNX Runtime's), then N runs per line
// of stdin, each timed with CLOCK_MONOTONIC.
std::string timing_program(const std::string& name, int outputs) {
  std::string more_outputs, more_args;  // the outputs after the first: YOLO's three scales
  std::string more_writes;              // written after the first, as ort-run.js concatenates them
  for (int k = 1; k < outputs; ++k) {
    const std::string o = "out" + std::to_string(k),
                      elements = name + "_OUTPUT" + std::to_string(k) + "_ELEMENTS";
    more_outputs +=
        "  float* " + o + " = aligned_alloc(4096, (" + elements + " * 4 + 4095) / 4096 * 4096);\n";
    more_args += ", " + o;
    more_writes += " fwrite(" + o + ", 4, " + elements + ", f);";
  }
  return "#define _POSIX_C_SOURCE 200809L\n#include <stdio.h>\n#include <stdlib.h>\n#include "
         "<time.h>\n#include \"" +
         name + ".h\"\n" +
         "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return "
         "t.tv_sec * 1e3 + t.tv_nsec / 1e6; }\n"
         "int main(int argc, char** argv) {\n"
         "  if (argc != 4) return 9;\n"
         "  ktune_set_num_threads(atoi(argv[3]));\n"
         "  float* in = aligned_alloc(4096, (" +
         name +
         "_INPUT0_ELEMENTS * 4 + 4095) / 4096 * 4096);\n"
         "  float* out = aligned_alloc(4096, (" +
         name + "_OUTPUT0_ELEMENTS * 4 + 4095) / 4096 * 4096);\n" + more_outputs +
         "  FILE* f = fopen(argv[1], \"rb\");\n"
         "  if (!f || fread(in, 4, " +
         name + "_INPUT0_ELEMENTS, f) != " + name +
         "_INPUT0_ELEMENTS) return 8;\n"
         "  fclose(f);\n"
         "  void* ctx = " +
         name +
         "_create();\n"
         "  if (!ctx || " +
         name + "_run(ctx, in, out" + more_args +
         ") != 0) return 7;\n"
         "  f = fopen(argv[2], \"wb\"); fwrite(out, 4, " +
         name + "_OUTPUT0_ELEMENTS, f);" + more_writes +
         " fclose(f);\n"
         "  printf(\"ready\\n\"); fflush(stdout);\n"
         "  int n;\n"
         "  while (scanf(\"%d\", &n) == 1) {\n"
         "    for (int i = 0; i < n; ++i) { double t = now(); " +
         name + "_run(ctx, in, out" + more_args +
         "); printf(i ? \" %.6f\" : \"%.6f\", now() - t); }\n"
         "    printf(\"\\n\"); fflush(stdout);\n"
         "  }\n"
         "  " +
         name + "_destroy(ctx);\n  return 0;\n}\n";
}

std::vector<float> floats(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> v(bytes.size() / 4);
  std::copy_n(reinterpret_cast<const float*>(bytes.data()), v.size(), v.begin());
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"resnet18", "mobilenetv2", "bert_layer"};
  std::vector<std::string> int8_models = {"resnet18_qdq"};
  std::vector<int> threads = {1, 2};
  int trials = 4000, rounds = 15, runs = 4;
  double time_budget_min = 7;
  std::string db_dir = "model_vs_ort_logs";
  std::vector<std::string> flushed = {"bert_layer"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "model_vs_ort: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") {
      models = split(value(), ',');
      if (models == std::vector<std::string>{"corpus"}) {
        models.clear();
        for (const auto& [m, input] : kCorpusInputs) models.push_back(m);
      }
    } else if (a == "--int8-models")
      int8_models = split(value(), ',');
    else if (a == "--threads") {
      threads.clear();
      for (const auto& t : split(value(), ',')) threads.push_back(std::stoi(t));
    } else if (a == "--trials")
      trials = std::stoi(value());
    else if (a == "--time-budget")
      time_budget_min = std::stod(value());
    else if (a == "--db-dir")
      db_dir = value();
    else if (a == "--flush-cache") {
      flushed = split(value(), ',');
      if (flushed == std::vector<std::string>{"none"}) flushed.clear();
    } else if (a == "--rounds")
      rounds = std::stoi(value());
    else if (a == "--runs")
      runs = std::stoi(value());
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: model_vs_ort [--models resnet18,mobilenetv2,bert_layer | corpus] "
                   "[--threads 1,2]\n"
                   "                    [--int8-models resnet18_qdq] [--trials 4000] "
                   "[--time-budget 7]\n"
                   "                    [--flush-cache bert_layer | none] [--db-dir DIR] "
                   "[--rounds 15] [--runs 4]\n"
                   "Tunes each model (a log already in --db-dir is reused), builds it, and times "
                   "it against ONNX Runtime in interleaved rounds; docs/benchmarks.md explains "
                   "the columns.\n";
      return 0;
    } else {
      std::cerr << "model_vs_ort: unknown option " << a << " (--help lists them)\n";
      return 2;
    }
  }
  const std::string ktune = KTUNE_BIN;
  const std::string ort_dir = KTUNE_ORT_DIR;
  if (!fs::exists(fs::path(ort_dir) / "node_modules" / "onnxruntime-node")) {
    std::cerr << "model_vs_ort: no ONNX Runtime in " << ort_dir << " (scripts/setup installs it)\n";
    return 1;
  }
  const fs::path work =
      fs::temp_directory_path() / ("ktune_model_vs_ort_" + std::to_string(::getpid()));
  fs::create_directories(work);
  fs::create_directories(db_dir);
  std::string only;
  for (const auto& list : {models, int8_models})
    for (const std::string& m : list) only += (only.empty() ? "" : ",") + m + ".onnx";
  run("/usr/bin/python3 " + quote(std::string(KTUNE_SOURCE_DIR) + "/scripts/make-test-models") +
      " " + quote(work.string()) + " --only " + quote(only));
  ::setenv("NODE_PATH", (fs::path(ort_dir) / "node_modules").c_str(), 1);

  std::cout << fmt::format("{:<12} {:>3} {:>10} {:>10} {:>8} {:>9} {:>10} {:>10} {:>9} {:>10}\n",
                           "model", "thr", "ktune ms", "ORT ms", "ktune/ORT", "max err", "steady",
                           "estimate", "run/est", "run/alone");
  double log_sum = 0, int8_log_sum = 0, corpus_log_sum = 0;
  int count = 0, int8_count = 0, corpus_count = 0;
  std::map<int, std::pair<double, int>> by_threads;  // log sum and count per thread count
  std::vector<double> run_over_estimate;             // per model and thread count
  std::vector<std::string> all = models;
  all.insert(all.end(), int8_models.begin(), int8_models.end());
  for (const std::string& m : all) {
    const bool int8 = std::find(int8_models.begin(), int8_models.end(), m) != int8_models.end();
    const std::string onnx = (work / (m + ".onnx")).string();
    if (!fs::exists(onnx)) {
      std::cout << m << ": not measured (scripts/make-test-models writes no " << m << ".onnx)\n";
      continue;
    }
    const std::string db = (fs::path(db_dir) / (m + ".db")).string();
    const auto corpus = kCorpusInputs.find(m);
    const std::string shape = corpus == kCorpusInputs.end() ? "" : corpus->second;
    const std::string input_flag = shape.empty() ? "" : " --input " + quote(shape);
    // Tune with the budget into a new log; a log from an earlier run is reused as it is.
    const bool reuse = fs::exists(db);
    const bool flush = std::find(flushed.begin(), flushed.end(), m) != flushed.end();
    const auto start = std::chrono::steady_clock::now();
    const std::string tuned =
        reuse ? "{}"
              : run(quote(ktune) + " tune-model " + quote(onnx) + input_flag + " --db " +
                    quote(db) + " --trials " + std::to_string(trials) + " --time-budget " +
                    fmt::format("{}", time_budget_min) + (flush ? " --flush-cache" : "") +
                    " --no-libraries --json 2>/dev/null");
    const double tune_min =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;
    const nlohmann::json summary = nlohmann::json::parse(tuned.substr(tuned.find('{')));
    const nlohmann::json built = summary.value("built_model", nlohmann::json::object());
    const double tune_estimate_ms = summary.value("estimated_s", 0.0) * 1e3;
    const double tune_run_ms = built.value("measured_s", 0.0) * 1e3;
    const double alone_ms = built.value("tuned_kernels_s", 0.0) * 1e3;
    const fs::path dir = work / m;
    fs::create_directories(dir);
    run(quote(ktune) + " build --model " + quote(onnx) + input_flag + " --db " + quote(db) +
        " --name " + m + " -o " + quote((dir / ("lib" + m + ".a")).string()) + " --header " +
        quote((dir / (m + ".h")).string()) + " --runtime " + quote((dir / "runtime.c").string()));
    std::ifstream header(dir / (m + ".h"));
    std::string text((std::istreambuf_iterator<char>(header)), {});
    int outputs = 1;
    while (text.find(m + "_OUTPUT" + std::to_string(outputs) + "_ELEMENTS ") != std::string::npos)
      ++outputs;
    std::ofstream(dir / "main.c") << timing_program(m, outputs);
    run("cc -O2 -std=c11 -I" + quote(dir.string()) + " " + quote((dir / "main.c").string()) + " " +
        quote((dir / "runtime.c").string()) + " " + quote((dir / ("lib" + m + ".a")).string()) +
        " -lm -lpthread -o " + quote((dir / "main").string()));
    // One input for both, uniform in [-1, 1).
    const auto at = text.find(m + "_INPUT0_ELEMENTS ");
    const long elements = std::stol(text.substr(at + m.size() + 17));
    std::vector<float> input(static_cast<size_t>(elements));
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : input) x = u(rng);
    const std::string in_path = (dir / "in.bin").string();
    std::ofstream(in_path, std::ios::binary)
        .write(reinterpret_cast<const char*>(input.data()), elements * 4);

    // tune-model's estimate taken again in the rounds: `ktune run --serve` builds the same model
    // from the log in its process and runs it one step at a time.
    std::vector<std::string> serve = {ktune, "run",          onnx,    "--db",
                                      db,    "--input-file", in_path, "--serve"};
    if (!shape.empty()) serve.insert(serve.end(), {"--input", shape});
    Peer e(serve);
    double model_log_sum = 0;
    int model_count = 0;
    for (int t : threads) {
      const double trip_before = t > 1 ? ktune::bench::core_round_trip_ns() : 0;
      const std::string ours = (dir / "ktune.out").string(), theirs = (dir / "ort.out").string();
      Peer k({(dir / "main").string(), in_path, ours, std::to_string(t)});
      std::vector<std::string> ort = {"node",
                                      std::string(KTUNE_SOURCE_DIR) + "/scripts/ort-run.js",
                                      onnx,
                                      in_path,
                                      theirs,
                                      "--threads",
                                      std::to_string(t),
                                      "--serve"};
      if (!shape.empty()) ort.insert(ort.end(), {"--input", shape});
      Peer o(ort);
      e.threads(t);
      k.time(runs);  // warm-up
      o.time(runs);
      e.time(runs);
      std::vector<double> kt, ot, steady_runs, estimates;
      // A pause after each batch: ONNX Runtime's intra-op workers keep spinning after a run (and
      // ktune's for 200 us), and spinning threads of one peer would take the CPUs the other's
      // threads need.
      auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };
      for (int r = 0; r < rounds; ++r) {
        for (double v : k.time(runs)) kt.push_back(v);
        // Then as many back to back (warm, ONNX Runtime idle), as the estimate times the kernels:
        // taken in every round, so a slow minute of the host weighs on both medians alike instead
        // of on a block of its own; the estimate's layer-by-layer runs right after.
        for (double v : k.time(runs)) steady_runs.push_back(v);
        // Its first run reads the weights the linked program's runs evicted: left out, as the
        // steady batch follows a batch of the linked program's own.
        const std::vector<double> layer_runs = e.time(runs + 1);
        estimates.insert(estimates.end(), layer_runs.begin() + 1, layer_runs.end());
        pause();
        for (double v : o.time(runs)) ot.push_back(v);
        pause();
      }
      const std::vector<float> a = floats(ours), b = floats(theirs);
      double max_ref = 0, max_diff = 0;
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
        max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
      }
      const double err = a.size() == b.size() && max_ref > 0 ? max_diff / max_ref : INFINITY;
      const double km = median(kt), om = median(ot);
      const double steady = median(steady_runs), estimate = median(estimates);
      // tune-model times its kernels alone at the runtime's default thread count (every CPU).
      const bool tuned_count = t == static_cast<int>(std::thread::hardware_concurrency());
      std::cout << fmt::format(
          "{:<12} {:>3} {:>10.3f} {:>10.3f} {:>8.3f} {:>9.1e} {:>10.3f} {:>10.3f} {:>9.3f} "
          "{:>10}\n",
          m, t, km, om, km / om, err, steady, estimate, steady / estimate,
          tuned_count && alone_ms > 0 ? fmt::format("{:.3f}", steady / alone_ms) : "-");
      run_over_estimate.push_back(steady / estimate);
      if (t > 1)
        std::cout << fmt::format(
            "{:<12} {:>3} inter-core round trip {:.0f} ns before, {:.0f} after\n", m, t,
            trip_before, ktune::bench::core_round_trip_ns());
      if (int8) {
        int8_log_sum += std::log(km / om);
        ++int8_count;
        continue;
      }
      log_sum += std::log(km / om);
      ++count;
      if (!shape.empty()) {
        corpus_log_sum += std::log(km / om);
        ++corpus_count;
      }
      by_threads[t].first += std::log(km / om);
      ++by_threads[t].second;
      model_log_sum += std::log(km / om);
      ++model_count;
    }
    // The model's figure over its thread counts (what a bar per model is judged on).
    if (model_count > 0 && !int8)
      std::cout << fmt::format("{}: ktune/ORT geomean over {} thread count{}: {:.3f}\n", m,
                               model_count, model_count == 1 ? "" : "s",
                               std::exp(model_log_sum / model_count));
    if (!shape.empty()) {
      // How much of the model runs in generated kernels (layouts, elementwise, pools, data
      // movement) rather than tuned tasks, layer by layer at the default thread count.
      const nlohmann::json layers =
          nlohmann::json::parse(run(quote(ktune) + " run " + quote(onnx) + input_flag + " --db " +
                                    quote(db) + " --runs 20 --json"))["layers"];
      double total = 0, generated = 0;
      for (const auto& l : layers) {
        total += l["ms"].get<double>();
        if (l["kind"] != "task") generated += l["ms"].get<double>();
      }
      std::cout << fmt::format(
          "{}: generated kernels {:.1f}% of the layers' time ({:.3f} of {:.3f} ms)\n", m,
          total > 0 ? 100 * generated / total : 0.0, generated, total);
    }
    if (reuse) {
      std::cout << fmt::format("{}: tuned by an earlier run ({})\n", m, db);
      continue;
    }
    std::cout << fmt::format(
        "{}: tune-model --trials {} --time-budget {}{} took {:.1f} min ({} trials{})\n", m, trials,
        time_budget_min, flush ? " --flush-cache" : "", tune_min, summary.value("trials", 0),
        summary.value("out_of_time", false) ? ", out of time" : "");
    if (tune_estimate_ms > 0)
      std::cout << fmt::format(
          "{}: tune-model's own estimate {:.3f} ms at {} threads, its run {:.3f} ms ({:.3f})\n", m,
          tune_estimate_ms, built.value("threads", 0), tune_run_ms, tune_run_ms / tune_estimate_ms);
  }
  fs::remove_all(work);
  if (!run_over_estimate.empty())
    std::cout << fmt::format("run_over_estimate from {:.3f} to {:.3f}\n",
                             *std::min_element(run_over_estimate.begin(), run_over_estimate.end()),
                             *std::max_element(run_over_estimate.begin(), run_over_estimate.end()));
  if (int8_count > 0)
    std::cout << fmt::format("model_over_ort_int8 {:.3f}\n", std::exp(int8_log_sum / int8_count));
  if (count == 0) return int8_count > 0 ? 0 : 1;
  for (const auto& [t, sum] : by_threads)
    std::cout << fmt::format("model_over_ort at {} thread{}: {:.3f}\n", t, t == 1 ? "" : "s",
                             std::exp(sum.first / sum.second));
  std::cout << fmt::format("model_over_ort {:.3f}\n", std::exp(log_sum / count));
  if (corpus_count > 0)
    std::cout << fmt::format("model_over_ort_corpus {:.3f}\n",
                             std::exp(corpus_log_sum / corpus_count));
  return 0;
}
