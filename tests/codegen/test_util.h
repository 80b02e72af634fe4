// Defines codegen's test helpers: aligned buffers, seeded data, running AArch64 artifacts in qemu.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "codegen/artifact.h"

namespace ktune::codegen::testing {

// A 64-byte aligned, zero-initialized byte buffer.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) : bytes_(bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, rounded ? rounded : 64)));
    std::memset(data_.get(), 0, rounded ? rounded : 64);
  }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_.get()); }
  void* data() { return data_.get(); }
  size_t bytes() const { return bytes_; }
  std::vector<uint8_t> copy() const { return {data_.get(), data_.get() + bytes_}; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t bytes_;
};

inline void fill_uniform(float* p, int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
}

inline std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

inline bool cross_tools_available() {
  return std::system("command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 && "
                     "command -v qemu-aarch64-static >/dev/null 2>&1") == 0;
}

inline void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Links the artifact's object with tests/codegen/aarch64_driver.cc and
// codegen/runtime_standalone.c (aarch64-linux-gnu-g++ -static), runs it under
// qemu-aarch64-static on `buffers` (one per argument, inputs filled) and returns the buffers
// with the outputs the kernel wrote. Throws std::runtime_error with the tool output on failure.
inline std::vector<std::vector<uint8_t>> run_on_aarch64(const Artifact& a,
                                                        std::vector<std::vector<uint8_t>> buffers) {
  char tmpl[] = "/tmp/ktune_aarch64_XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  write_file(dir + "/kernel.o", a.object.data(), a.object.size());
  std::ostringstream spec;
  spec << a.signature.size() << "\n";
  for (size_t i = 0; i < a.signature.size(); ++i) {
    spec << buffers[i].size() << " " << (a.signature[i].is_output ? 1 : 0) << "\n";
    write_file(dir + "/in" + std::to_string(i) + ".bin", buffers[i].data(), buffers[i].size());
  }
  const std::string s = spec.str();
  write_file(dir + "/spec", s.data(), s.size());
  const std::string src = KTUNE_TEST_SOURCE_DIR;
  const std::string link = "aarch64-linux-gnu-g++ -O1 -static -pthread -o " + dir + "/run " +
                           shell_quote(src + "/tests/codegen/aarch64_driver.cc") + " -x c " +
                           shell_quote(src + "/codegen/runtime_standalone.c") + " -x none " + dir +
                           "/kernel.o -Wl,--defsym=ktune_entry=" + a.entry + " -lm > " + dir + "/link.log 2>&1";
  if (std::system(link.c_str()) != 0) {
    auto log = read_file(dir + "/link.log");
    throw std::runtime_error("cross link failed: " + std::string(log.begin(), log.end()));
  }
  const std::string run = "qemu-aarch64-static " + dir + "/run " + dir + " > " + dir + "/run.log 2>&1";
  const int rc = std::system(run.c_str());
  auto log = read_file(dir + "/run.log");
  const std::string out(log.begin(), log.end());
  if (rc != 0 || out.find("status 0") == std::string::npos) {
    throw std::runtime_error("qemu run failed (rc " + std::to_string(rc) + "): " + out);
  }
  for (size_t i = 0; i < a.signature.size(); ++i) {
    if (a.signature[i].is_output) buffers[i] = read_file(dir + "/out" + std::to_string(i) + ".bin");
  }
  [[maybe_unused]] const int cleaned = std::system(("rm -rf " + dir).c_str());
  return buffers;
}

}  // namespace ktune::codegen::testing
