// Defines codegen's test helpers: aligned buffers, seeded data, running AArch64 artifacts in qemu.
#pragma once

#include <sys/stat.h>
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
  T* as() {
    return reinterpret_cast<T*>(data_.get());
  }
  void* data() { return data_.get(); }
  size_t bytes() const { return bytes_; }
  // Fills every byte with `byte`: an output buffer is poisoned before each kernel run so that an
  // element the kernel never writes fails its check. 0xFF makes every float NaN; integer outputs
  // take a byte whose pattern no test expects (0x5A: 0x5A5A5A5A5A5A5A5A as int64).
  void poison(uint8_t byte = 0xFF) { std::memset(data_.get(), byte, bytes_); }
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
  return std::system(
             "command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 && "
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

// One kernel of a batch for run_batch_on_aarch64: its artifact (entry names must differ within a
// batch) and its buffers, one per argument, inputs filled.
struct Aarch64Case {
  Artifact artifact;
  std::vector<std::vector<uint8_t>> buffers;
};

// Links every case's object with tests/codegen/aarch64_batch_driver.cc, a generated table of
// entries and codegen/parallel_runtime.c into ONE static program, runs it once under
// qemu-aarch64-static and returns each case's buffers with the outputs its kernel wrote. One
// link and one emulator start for hundreds of kernels, instead of one each.
// Throws std::runtime_error with the tool output on failure.
inline std::vector<std::vector<std::vector<uint8_t>>> run_batch_on_aarch64(
    const std::vector<Aarch64Case>& cases) {
  char tmpl[] = "/tmp/ktune_aarch64_batch_XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  std::ostringstream table, objects;
  table << "#include <stdint.h>\n";
  for (size_t k = 0; k < cases.size(); ++k) {
    const Artifact& a = cases[k].artifact;
    const std::string kdir = dir + "/k" + std::to_string(k);
    if (mkdir(kdir.c_str(), 0700) != 0) throw std::runtime_error("mkdir failed: " + kdir);
    write_file(kdir + "/kernel.o", a.object.data(), a.object.size());
    objects << " " << kdir << "/kernel.o";
    std::ostringstream spec;
    spec << a.signature.size() << "\n";
    for (size_t i = 0; i < a.signature.size(); ++i) {
      spec << cases[k].buffers[i].size() << " " << (a.signature[i].is_output ? 1 : 0) << "\n";
      write_file(kdir + "/in" + std::to_string(i) + ".bin", cases[k].buffers[i].data(),
                 cases[k].buffers[i].size());
    }
    const std::string s = spec.str();
    write_file(kdir + "/spec", s.data(), s.size());
    table << "extern int32_t " << a.entry << "(void* const*);\n";
  }
  table << "typedef int32_t (*KernelEntry)(void* const*);\nconst KernelEntry ktune_kernels[] = {";
  for (size_t k = 0; k < cases.size(); ++k) table << (k ? ", " : "") << cases[k].artifact.entry;
  table << "};\nconst int ktune_kernel_count = " << cases.size() << ";\n";
  const std::string t = table.str();
  write_file(dir + "/table.c", t.data(), t.size());

  const std::string src = KTUNE_TEST_SOURCE_DIR;
  const std::string link = "aarch64-linux-gnu-g++ -O1 -static -pthread -o " + dir + "/run " +
                           shell_quote(src + "/tests/codegen/aarch64_batch_driver.cc") + " -x c " +
                           dir + "/table.c -x c " +
                           shell_quote(src + "/codegen/parallel_runtime.c") + " -x none" +
                           objects.str() + " -lm > " + dir + "/link.log 2>&1";
  if (std::system(link.c_str()) != 0) {
    auto log = read_file(dir + "/link.log");
    throw std::runtime_error("cross link failed: " + std::string(log.begin(), log.end()));
  }
  const std::string run =
      "qemu-aarch64-static " + dir + "/run " + dir + " > " + dir + "/run.log 2>&1";
  const int rc = std::system(run.c_str());
  auto log = read_file(dir + "/run.log");
  const std::string out(log.begin(), log.end());
  if (rc != 0) throw std::runtime_error("qemu run failed (rc " + std::to_string(rc) + "): " + out);
  std::vector<std::vector<std::vector<uint8_t>>> results;
  for (size_t k = 0; k < cases.size(); ++k) {
    const std::string expected = "status " + std::to_string(k) + " 0\n";
    if (out.find(expected) == std::string::npos) {
      throw std::runtime_error("kernel " + std::to_string(k) + " (" + cases[k].artifact.entry +
                               ") did not return 0 under qemu: " + out);
    }
    results.push_back(cases[k].buffers);
    const Artifact& a = cases[k].artifact;
    for (size_t i = 0; i < a.signature.size(); ++i) {
      if (a.signature[i].is_output) {
        results.back()[i] =
            read_file(dir + "/k" + std::to_string(k) + "/out" + std::to_string(i) + ".bin");
      }
    }
  }
  [[maybe_unused]] const int cleaned = std::system(("rm -rf " + dir).c_str());
  return results;
}

// Runs one artifact under qemu-aarch64-static on `buffers` (one per argument, inputs filled) and
// returns the buffers with the outputs the kernel wrote: a batch of one (run_batch_on_aarch64).
inline std::vector<std::vector<uint8_t>> run_on_aarch64(const Artifact& a,
                                                        std::vector<std::vector<uint8_t>> buffers) {
  return run_batch_on_aarch64({Aarch64Case{a, std::move(buffers)}}).front();
}

}  // namespace ktune::codegen::testing
