// Test driver linked (with aarch64-linux-gnu-g++ -static) around one kernel object and run under
// qemu-aarch64-static: reads <dir>/spec and <dir>/in<i>.bin, calls the kernel (aliased to
// ktune_entry with --defsym), writes <dir>/out<i>.bin and prints the kernel's status.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int32_t ktune_entry(void* const* args);

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  FILE* spec = std::fopen((dir + "/spec").c_str(), "r");
  if (!spec) return 3;
  int n = 0;
  if (std::fscanf(spec, "%d", &n) != 1) return 4;
  std::vector<void*> args(n);
  std::vector<long long> bytes(n);
  std::vector<int> is_output(n);
  for (int i = 0; i < n; ++i) {
    if (std::fscanf(spec, "%lld %d", &bytes[i], &is_output[i]) != 2) return 5;
    size_t rounded = (static_cast<size_t>(bytes[i]) + 63) / 64 * 64;
    args[i] = std::aligned_alloc(64, rounded ? rounded : 64);
    FILE* in = std::fopen((dir + "/in" + std::to_string(i) + ".bin").c_str(), "rb");
    if (!in || std::fread(args[i], 1, bytes[i], in) != static_cast<size_t>(bytes[i])) return 6;
    std::fclose(in);
  }
  std::fclose(spec);
  const int32_t status = ktune_entry(args.data());
  for (int i = 0; i < n; ++i) {
    if (!is_output[i]) continue;
    FILE* out = std::fopen((dir + "/out" + std::to_string(i) + ".bin").c_str(), "wb");
    if (!out || std::fwrite(args[i], 1, bytes[i], out) != static_cast<size_t>(bytes[i])) return 7;
    std::fclose(out);
  }
  std::printf("status %d\n", status);
  return 0;
}
