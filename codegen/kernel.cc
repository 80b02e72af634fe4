// The process-wide ORC LLJIT session and per-kernel linking (KaleidoscopeJIT's shape).
#include "codegen/kernel.h"

#include <atomic>
#include <mutex>
#include <string>

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include "codegen/llvm_init.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "support/error.h"

namespace ktune::codegen {
namespace {

std::string message_of(llvm::Error err) { return llvm::toString(std::move(err)); }

// One LLJIT for the whole process. Object linking goes through JITLink (LLJIT's default on
// ELF x86-64 and AArch64), whose memory is returned when a kernel's tracker is removed.
class Session {
 public:
  static Session& get() {
    static Session s;  // thread-safe initialization; never destroyed before exit
    return s;
  }

  llvm::orc::LLJIT& jit() {
    if (!jit_) throw Error(ErrorKind::kUnsupported, "cannot start the LLVM JIT: " + init_error_);
    return *jit_;
  }
  std::mutex& mutex() { return mu_; }
  uint64_t next_id() { return next_id_++; }

 private:
  Session() {
    initialize_llvm();
    auto jit = llvm::orc::LLJITBuilder().create();
    if (!jit) {
      init_error_ = message_of(jit.takeError());
      return;
    }
    jit_ = std::move(*jit);
    // Kernels call the runtime (ktune_parallel_for, the workspaces); define it explicitly, as
    // the host executable need not export its symbols dynamically.
    llvm::orc::SymbolMap runtime;
    runtime[jit_->mangleAndIntern("ktune_parallel_for")] = {
        llvm::orc::ExecutorAddr::fromPtr(&ktune_parallel_for), llvm::JITSymbolFlags::Exported};
    runtime[jit_->mangleAndIntern("ktune_workspace_alloc")] = {
        llvm::orc::ExecutorAddr::fromPtr(&ktune_workspace_alloc), llvm::JITSymbolFlags::Exported};
    runtime[jit_->mangleAndIntern("ktune_workspace_free")] = {
        llvm::orc::ExecutorAddr::fromPtr(&ktune_workspace_free), llvm::JITSymbolFlags::Exported};
    auto process = jit_->getProcessSymbolsJITDylib();
    llvm::Error err =
        process ? process->define(llvm::orc::absoluteSymbols(std::move(runtime)))
                : jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(runtime)));
    if (err) {
      init_error_ = message_of(std::move(err));
      jit_.reset();
    }
  }

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string init_error_;
  std::mutex mu_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace

struct Kernel::Linked {
  llvm::orc::JITDylib* dylib = nullptr;
  llvm::orc::ResourceTrackerSP tracker;

  ~Linked() {
    Session& s = Session::get();
    std::lock_guard<std::mutex> lock(s.mutex());
    // Failures here cannot be reported from a destructor; the JIT logs nothing for them and
    // the memory is at worst kept until exit.
    if (tracker) llvm::consumeError(tracker->remove());
    if (dylib) llvm::consumeError(s.jit().getExecutionSession().removeJITDylib(*dylib));
  }
};

Kernel Kernel::load(const Artifact& artifact) {
  // Host detection costs a few hundred microseconds; the host does not change.
  static const std::string host = Target::host().str();
  if (artifact.target != host) {
    const Target wanted = Target::parse(artifact.target);
    if (!wanted.is_host_compatible()) {
      throw Error(ErrorKind::kUnsupported, "artifact for '" + artifact.target +
                                               "' cannot run on this host ('" + host + "')");
    }
  }
  Session& s = Session::get();
  llvm::orc::LLJIT& jit = s.jit();
  Kernel k;
  k.signature_ = artifact.signature;
  k.linked_ = std::make_unique<Linked>();
  {
    std::lock_guard<std::mutex> lock(s.mutex());
    // A JITDylib per kernel: candidates of one workload share their entry name.
    auto dylib = jit.createJITDylib("ktune_kernel_" + std::to_string(s.next_id()));
    if (!dylib)
      throw Error(ErrorKind::kBuild, "cannot create a JITDylib: " + message_of(dylib.takeError()));
    k.linked_->dylib = &*dylib;
    k.linked_->tracker = dylib->createResourceTracker();
  }
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char*>(artifact.object.data()),
                      artifact.object.size()),
      artifact.entry + ".o");
  if (llvm::Error err = jit.addObjectFile(k.linked_->tracker, std::move(buffer))) {
    throw Error(ErrorKind::kBuild,
                "cannot add the object of '" + artifact.entry + "': " + message_of(std::move(err)));
  }
  auto addr = jit.lookup(*k.linked_->dylib, artifact.entry);
  if (!addr) {
    throw Error(ErrorKind::kBuild,
                "cannot link '" + artifact.entry + "': " + message_of(addr.takeError()));
  }
  k.fn_ = addr->toPtr<EntryFn>();
  return k;
}

Kernel::Kernel(Kernel&&) noexcept = default;
Kernel& Kernel::operator=(Kernel&&) noexcept = default;
Kernel::~Kernel() = default;

}  // namespace ktune::codegen
