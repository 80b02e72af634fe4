// Test driver linked (with aarch64-linux-gnu-g++ -static) around many kernel objects and run once
// under qemu-aarch64-static: for each kernel i of the generated table, reads <dir>/k<i>/spec and
// in<j>.bin, calls the kernel, writes out<j>.bin and prints "status <i> <kernel status>".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using KernelEntry = int32_t (*)(void* const* args);
extern "C" const KernelEntry ktune_kernels[];
extern "C" const int ktune_kernel_count;

namespace {

// Returns the kernel's status, or a negative driver error.
int run_one(const std::string& dir, KernelEntry entry) {
  FILE* spec = std::fopen((dir + "/spec").c_str(), "r");
  if (!spec) return -3;
  int n = 0;
  if (std::fscanf(spec, "%d", &n) != 1) return -4;
  std::vector<void*> args(n);
  std::vector<long long> bytes(n);
  std::vector<int> is_output(n);
  for (int i = 0; i < n; ++i) {
    if (std::fscanf(spec, "%lld %d", &bytes[i], &is_output[i]) != 2) return -5;
    size_t rounded = (static_cast<size_t>(bytes[i]) + 63) / 64 * 64;
    args[i] = std::aligned_alloc(64, rounded ? rounded : 64);
    FILE* in = std::fopen((dir + "/in" + std::to_string(i) + ".bin").c_str(), "rb");
    if (!in || std::fread(args[i], 1, bytes[i], in) != static_cast<size_t>(bytes[i])) return -6;
    std::fclose(in);
  }
  std::fclose(spec);
  const int32_t status = entry(args.data());
  for (int i = 0; i < n; ++i) {
    if (is_output[i]) {
      FILE* out = std::fopen((dir + "/out" + std::to_string(i) + ".bin").c_str(), "wb");
      if (!out || std::fwrite(args[i], 1, bytes[i], out) != static_cast<size_t>(bytes[i]))
        return -7;
      std::fclose(out);
    }
    std::free(args[i]);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string root = argv[1];
  for (int k = 0; k < ktune_kernel_count; ++k) {
    std::printf("status %d %d\n", k, run_one(root + "/k" + std::to_string(k), ktune_kernels[k]));
  }
  return 0;
}
