// Defines the helpers of the `ktune build` end-to-end tests (single and --manifest builds):
// temporary directories, tasks and logs with known records, C programs that call kernels,
// references.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"
#include "tests/cli_util.h"
#include "tuning_db/database.h"

namespace ktune::tools::build_test {

namespace fs = std::filesystem;
using testing_cli::Output;
using testing_cli::quote;
using testing_cli::shell;

inline const char* const kCross = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ktune-build-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every entry of dir with the contents of the regular files ("" for a directory).
inline std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    files[e.path().filename().string()] = e.is_regular_file() ? read_file(e.path().string()) : "";
  return files;
}

inline std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// `ktune build <args>` run in `cwd`.
inline Output ktune_build(const std::string& args, const fs::path& cwd = fs::current_path()) {
  return shell("cd " + quote(cwd.string()) + " && " + quote(KTUNE_BINARY) + " build " + args);
}

inline schedule_space::Task make_task(const std::string& template_name,
                                      const std::vector<std::string>& words,
                                      const std::string& target_text = "host") {
  const codegen::Target target = codegen::Target::parse(target_text);
  return schedule_space::Task::create(
      template_name, schedule_space::parse_workload_args(template_name, words),
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(),
                                         target.cores()));
}

// The text after "<prefix>" on the first line of the header that starts with it.
inline std::string header_field(const std::string& header, const std::string& prefix) {
  for (const auto& l : lines_of(header))
    if (l.rfind(prefix, 0) == 0) return l.substr(prefix.size());
  ADD_FAILURE() << "no line starting with '" << prefix << "' in\n" << header;
  return "";
}

inline nlohmann::json header_config(const std::string& header) {
  return nlohmann::json::parse(header_field(header, " * config:   "));
}

inline tuning_db::Record make_record(const schedule_space::Task& task,
                                     const schedule_space::Config& config,
                                     std::vector<double> costs) {
  const codegen::Target target = codegen::Target::parse("host");
  tuning_db::Record r;
  r.workload_key = task.workload_key();
  r.template_name = task.template_name();
  r.args = task.args_json();
  r.flop = task.flop();
  r.target = {target.str(), codegen::llvm_version()};
  r.config_index = static_cast<int64_t>(config.index());
  r.config = config.to_json();
  if (costs.empty()) {
    r.error = ErrorKind::kRun;
    r.error_message = "crashed (test record)";
  }
  r.costs = std::move(costs);
  r.all_cost = 0.5;
  r.tuner = "random";
  r.timestamp = 1.7e9;
  r.ktune_version = "0.1.0";
  return r;
}

// Configs of the task other than its fallback that instantiate, chosen by a seeded generator.
inline std::vector<schedule_space::Config> pick_configs(const schedule_space::Task& task, size_t n,
                                                        uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<schedule_space::Config> picked;
  std::set<uint64_t> seen{task.fallback_config().index()};
  while (picked.size() < n) {
    const uint64_t index = rng() % task.space().size();
    if (!seen.insert(index).second) continue;
    const schedule_space::Config config = task.space().get(index);
    try {
      (void)task.instantiate(config);
    } catch (const Error&) {
      continue;
    }
    picked.push_back(config);
  }
  return picked;
}

// A log holding, for `task` on the host: a fast record of configs[0], a slower one of configs[1]
// and a failure of the fallback config. Returns the fast record's id.
inline int64_t write_log(const std::string& path, const schedule_space::Task& task,
                         const std::vector<schedule_space::Config>& configs) {
  auto db = tuning_db::Database::open(path);
  const auto ids = db.add({make_record(task, configs[0], {2.0e-5, 2.2e-5}),
                           make_record(task, configs[1], {9.0e-5}),
                           make_record(task, task.fallback_config(), {})});
  return ids[0];
}

// s as a C string literal (it holds no quote or backslash: file-name prefixes).
inline std::string quote_c(const std::string& s) { return "\"" + s + "\""; }

// Compiles main.c (in dir) with `compiler` against the object and runtime, runs it with `args`
// (through `runner`, e.g. qemu) and returns what it printed, or nullopt after failing the test
// when a step fails.
inline std::optional<std::string> compile_and_run(const TempDir& dir, const std::string& program,
                                                  const std::string& object,
                                                  const std::string& runtime,
                                                  const std::string& compiler = "cc",
                                                  const std::string& runner = "",
                                                  const std::string& args = "") {
  write_file(dir.file("main.c"), program);
  const std::string exe = dir.file("main");
  const Output built =
      shell(compiler + " -std=c11 -O1 -Wall -Wextra -Werror -I" + quote(dir.path().string()) + " " +
            quote(dir.file("main.c")) + " " + quote(object) + " " + quote(runtime) + " -o " +
            quote(exe) + " -lpthread -lm");
  EXPECT_EQ(built.status, 0) << built.out << built.err;
  if (built.status != 0) return std::nullopt;
  const Output ran =
      shell(runner + (runner.empty() ? "" : " ") + quote(exe) + (args.empty() ? "" : " ") + args);
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  if (ran.status != 0) return std::nullopt;
  return ran.out;
}

// One kernel call of file_io_program: its wrapper, its `--json` "arguments", and the prefix of its
// data files.
struct KernelCall {
  std::string wrapper;
  nlohmann::json arguments;
  std::string prefix;
};

// C source of a program that, for each call in order, loads the inputs from
// DIR/<prefix>in<i>.bin (argv[1] is DIR), fills the outputs with NaN bytes, calls the wrapper and
// stores the outputs to DIR/<prefix>out<i>.bin. Exits 2 when a kernel returns non-zero.
inline std::string file_io_program(const std::string& header,
                                   const std::vector<KernelCall>& calls) {
  std::ostringstream c;
  c << "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"" << header
    << "\"\n"
    << R"(static char path[4096];
static void* buffer(const char* dir, const char* kind, int i, size_t bytes, int load) {
  void* p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  memset(p, 0xff, bytes); /* NaN everywhere the kernel does not write */
  if (!load) return p;
  snprintf(path, sizeof path, "%s/%s%d.bin", dir, kind, i);
  FILE* f = fopen(path, "rb");
  if (!f || fread(p, 1, bytes, f) != bytes) exit(3);
  fclose(f);
  return p;
}
static void store(const char* dir, const char* kind, int i, const void* p, size_t bytes) {
  snprintf(path, sizeof path, "%s/%s%d.bin", dir, kind, i);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) exit(4);
  fclose(f);
}
int main(int argc, char** argv) {
  if (argc != 2) return 5;
)";
  for (size_t k = 0; k < calls.size(); ++k) {
    const nlohmann::json& arguments = calls[k].arguments;
    const std::string in = quote_c(calls[k].prefix + "in"), out = quote_c(calls[k].prefix + "out");
    c << "  {\n";
    for (size_t i = 0; i < arguments.size(); ++i)
      c << "    void* a" << i << " = buffer(argv[1], " << in << ", " << i << ", "
        << arguments[i]["bytes"].get<int64_t>() << ", "
        << (arguments[i]["output"].get<bool>() ? 0 : 1) << ");\n";
    c << "    if (" << calls[k].wrapper << "(";
    for (size_t i = 0; i < arguments.size(); ++i) c << (i ? ", " : "") << "a" << i;
    c << ") != 0) return 2;\n";
    for (size_t i = 0; i < arguments.size(); ++i)
      if (arguments[i]["output"].get<bool>())
        c << "    store(argv[1], " << out << ", " << i << ", a" << i << ", "
          << arguments[i]["bytes"].get<int64_t>() << ");\n";
    c << "  }\n";
  }
  c << "  return 0;\n}\n";
  return c.str();
}

// The reference outputs of task's plain schedule (te's interpreter) on seeded inputs, with the
// inputs written to dir/<prefix>in<i>.bin for file_io_program; checks that `arguments` (the
// kernel's --json) match the reference's signature. Buffers in argument order.
inline std::vector<te::HostBuffer> reference_outputs(const schedule_space::Task& task,
                                                     const nlohmann::json& arguments,
                                                     const TempDir& dir,
                                                     const std::string& prefix) {
  const schedule_space::Instantiated ref = task.reference();
  const te::LoweredFunc f = te::lower(ref.schedule, ref.args, "reference");
  std::vector<te::HostBuffer> buffers;
  EXPECT_EQ(arguments.size(), f.args.size());
  if (arguments.size() != f.args.size()) return buffers;
  for (size_t i = 0; i < f.args.size(); ++i) {
    EXPECT_EQ(arguments[i]["shape"].get<std::vector<int64_t>>(), f.args[i].shape);
    EXPECT_EQ(arguments[i]["dtype"], f.args[i].dtype.str());
    EXPECT_EQ(arguments[i]["output"], f.args[i].is_output);
    buffers.emplace_back(f.args[i].shape, f.args[i].dtype);
    if (!f.args[i].is_output) {
      buffers.back().fill_random(100 + i);
      write_file(
          dir.file(prefix + "in" + std::to_string(i) + ".bin"),
          std::string(static_cast<const char*>(buffers.back().data()), buffers.back().bytes()));
    }
  }
  std::vector<te::HostBuffer*> pointers;
  for (auto& b : buffers) pointers.push_back(&b);
  te::interpret(f, pointers);
  return buffers;
}

// Compares every output the program stored (dir/<prefix>out<i>.bin) with the reference's, within
// 1e-4 relative; NaN (an element the kernel never wrote) is never within.
inline void expect_outputs_match(const std::vector<te::HostBuffer>& reference,
                                 const nlohmann::json& arguments, const TempDir& dir,
                                 const std::string& prefix) {
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!arguments[i]["output"].get<bool>()) continue;
    const std::string bytes = read_file(dir.file(prefix + "out" + std::to_string(i) + ".bin"));
    ASSERT_EQ(bytes.size(), reference[i].bytes()) << prefix << "out" << i;
    te::HostBuffer got(reference[i].shape(), reference[i].dtype());
    std::memcpy(got.data(), bytes.data(), bytes.size());
    int64_t bad = 0;
    for (int64_t e = 0; e < got.num_elements(); ++e) {
      const double want = reference[i].get(e), have = got.get(e);
      if (!(std::abs(have - want) <= 1e-4 * (1 + std::abs(want)))) ++bad;
    }
    EXPECT_EQ(bad, 0) << "of " << got.num_elements() << " elements of output " << i << " of "
                      << prefix;
  }
}

// A failed run: exit status 1, nothing on stdout, one stderr line "ktune: error: ..." holding
// message.
inline void expect_one_error_line(const Output& out, const std::string& message) {
  EXPECT_EQ(out.status, 1) << out.out;
  EXPECT_EQ(out.out, "");
  const auto err = lines_of(out.err);
  ASSERT_EQ(err.size(), 1u) << out.err;
  EXPECT_EQ(err[0].rfind("ktune: error: ", 0), 0u) << err[0];
  EXPECT_TRUE(contains(err[0], message)) << err[0];
}

struct BadCase {
  std::string what;
  std::string args;     // after `ktune build`; DIR stands for the case's directory
  std::string message;  // a part of the one error line
};

inline std::string replace_dir(std::string s, const std::string& dir) {
  for (size_t at = s.find("DIR"); at != std::string::npos; at = s.find("DIR", at + dir.size()))
    s.replace(at, 3, dir);
  return s;
}

}  // namespace ktune::tools::build_test
