// Shared-object kernels: ld.lld links them on the server, dlopen loads them on the device.
#include "codegen/shared_object.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/error.h"

extern char** environ;

namespace ktune::codegen {
namespace {

constexpr uint16_t kElfTypeShared = 3;  // ET_DYN

bool is_elf(const std::vector<uint8_t>& b) {
  return b.size() >= 64 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' &&
         b[5] == 1;  // little-endian
}

uint16_t u16_at(const std::vector<uint8_t>& b, size_t offset) {
  return static_cast<uint16_t>(b[offset] | (b[offset + 1] << 8));
}

// A file in the temporary directory, removed when this goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& suffix) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("ktune-XXXXXX" + suffix)).string();
    const int fd = ::mkstemps(pattern.data(), static_cast<int>(suffix.size()));
    if (fd < 0)
      throw Error(ErrorKind::kIo,
                  "cannot create a temporary file: " + std::string(std::strerror(errno)));
    ::close(fd);
    path_ = pattern;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

  void write(const std::vector<uint8_t>& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw Error(ErrorKind::kIo, "cannot write " + path_);
  }

  std::vector<uint8_t> read() const {
    std::ifstream in(path_, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>());
  }

 private:
  std::string path_;
};

// Runs argv (argv[0] looked up on PATH) to completion with stderr into `log`; returns its exit
// status, or -1 when it could not be started (not installed).
int run_to_completion(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_TRUNC, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

bool is_shared_object(const std::vector<uint8_t>& bytes) {
  return is_elf(bytes) && u16_at(bytes, 16) == kElfTypeShared;
}

std::string elf_architecture(const std::vector<uint8_t>& bytes) {
  if (!is_elf(bytes)) return "";
  switch (u16_at(bytes, 18)) {
    case 3:
      return "i386";
    case 40:
      return "arm";
    case 62:
      return "x86_64";
    case 183:
      return "aarch64";
    case 243:
      return "riscv64";
    default:
      return "machine " + std::to_string(u16_at(bytes, 18));
  }
}

std::string native_architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#elif defined(__arm__)
  return "arm";
#elif defined(__i386__)
  return "i386";
#else
  return "unknown";
#endif
}

std::vector<uint8_t> link_shared_objects(const std::vector<Artifact>& artifacts,
                                         const std::string& linker) {
  std::vector<std::unique_ptr<TempFile>> objects;
  TempFile shared(".so"), log(".log");
  for (const Artifact& a : artifacts) {
    objects.push_back(std::make_unique<TempFile>(".o"));
    objects.back()->write(a.object);
  }
  // -z noexecstack: the kernels never need an executable stack, and some loaders refuse one.
  int status = -1;
  std::string ld;
  for (const std::string& name : linker.empty() ? std::vector<std::string>{"ld.lld-19", "ld.lld"}
                                                : std::vector<std::string>{linker}) {
    ld = name;
    std::vector<std::string> argv = {ld,   "-shared",    "-z", "noexecstack", "--build-id=none",
                                     "-o", shared.path()};
    for (const auto& o : objects) argv.push_back(o->path());
    status = run_to_completion(argv, log.path());
    if (status >= 0) break;
  }
  if (status < 0)
    throw Error(ErrorKind::kBuild,
                "cannot link a shared object: " +
                    (linker.empty()
                         ? std::string("neither ld.lld-19 nor ld.lld is on PATH (install lld-19)")
                         : "cannot start " + linker));
  if (status != 0) {
    const std::vector<uint8_t> text = log.read();
    std::string message(text.begin(), text.end());
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    throw Error(ErrorKind::kBuild,
                ld + " failed (status " + std::to_string(status) + "): " + message);
  }
  std::vector<uint8_t> bytes = shared.read();
  if (!is_shared_object(bytes))
    throw Error(ErrorKind::kBuild, ld + " did not write a shared object");
  return bytes;
}

Artifact link_shared(const Artifact& artifact, const std::string& linker) {
  Artifact linked = artifact;
  linked.object = link_shared_objects({artifact}, linker);
  return linked;
}

SharedLibrary SharedLibrary::load(const std::vector<uint8_t>& bytes) {
  const std::string arch = elf_architecture(bytes);
  if (arch.empty()) throw Error(ErrorKind::kBuild, "the library is not an ELF file");
  if (arch != native_architecture())
    throw Error(ErrorKind::kUnsupported, "the library is " + arch + " code; this process runs " +
                                             native_architecture() + " code");
  if (!is_shared_object(bytes)) throw Error(ErrorKind::kBuild, "not a shared object");
  TempFile file(".so");
  file.write(bytes);
  SharedLibrary lib;
  lib.handle_ = ::dlopen(file.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_) {
    const char* why = ::dlerror();
    throw Error(ErrorKind::kBuild,
                std::string("cannot load the library: ") + (why ? why : "dlopen failed"));
  }
  return lib;
}

void* SharedLibrary::symbol(const std::string& name) const {
  void* p = handle_ ? ::dlsym(handle_, name.c_str()) : nullptr;
  if (!p) throw Error(ErrorKind::kBuild, "the library has no symbol '" + name + "'");
  return p;
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_) ::dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_) ::dlclose(handle_);
}

SharedKernel SharedKernel::load(const Artifact& artifact) {
  const std::string arch = elf_architecture(artifact.object);
  if (arch.empty()) throw Error(ErrorKind::kBuild, "the kernel is not an ELF file");
  if (arch != native_architecture())
    throw Error(ErrorKind::kUnsupported, "the kernel is " + arch + " code; this device runs " +
                                             native_architecture() + " code");
  if (!is_shared_object(artifact.object))
    throw Error(ErrorKind::kBuild,
                "the kernel is a relocatable object; this loader takes shared objects only "
                "(the server links kernels for devices that cannot build)");
  // dlopen needs a path; the file can go as soon as the library is mapped.
  TempFile file(".so");
  file.write(artifact.object);
  SharedKernel kernel;
  kernel.handle_ = ::dlopen(file.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!kernel.handle_) {
    const char* why = ::dlerror();
    throw Error(ErrorKind::kBuild,
                std::string("cannot load the kernel: ") + (why ? why : "dlopen failed"));
  }
  kernel.fn_ = reinterpret_cast<EntryFn>(::dlsym(kernel.handle_, artifact.entry.c_str()));
  if (!kernel.fn_)
    throw Error(ErrorKind::kBuild, "the kernel has no symbol '" + artifact.entry + "'");
  kernel.signature_ = artifact.signature;
  return kernel;
}

SharedKernel::SharedKernel(SharedKernel&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      fn_(std::exchange(other.fn_, nullptr)),
      signature_(std::move(other.signature_)) {}

SharedKernel& SharedKernel::operator=(SharedKernel&& other) noexcept {
  if (this != &other) {
    if (handle_) ::dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    fn_ = std::exchange(other.fn_, nullptr);
    signature_ = std::move(other.signature_);
  }
  return *this;
}

SharedKernel::~SharedKernel() {
  if (handle_) ::dlclose(handle_);
}

}  // namespace ktune::codegen
