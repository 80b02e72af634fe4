// LLVM smoke tests: a loop built with IRBuilder is JIT-linked through Kernel and returns the right
// sum; the same loop as an AArch64 object runs under qemu; loading and freeing kernels 10,000
// times does not grow the process.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "codegen/kernel.h"
#include "codegen/target.h"
#include "support/error.h"
#include "tests/codegen/test_util.h"

namespace ktune::codegen {
namespace {

constexpr int64_t kN = 1000;

// `int32_t sum_loop(void* const* args)`: *(int64*)args[1] = sum of (int64*)args[0][0..kN).
Artifact sum_loop_artifact(const Target& target) {
  llvm::InitializeAllTargetInfos();
  llvm::InitializeAllTargets();
  llvm::InitializeAllTargetMCs();
  llvm::InitializeAllAsmPrinters();
  llvm::LLVMContext ctx;
  auto m = std::make_unique<llvm::Module>("smoke", ctx);
  llvm::IRBuilder<> b(ctx);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {b.getPtrTy()}, false),
                                    llvm::Function::ExternalLinkage, "sum_loop", m.get());
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  b.SetInsertPoint(entry);
  llvm::Value* in = b.CreateLoad(b.getPtrTy(), fn->getArg(0));
  llvm::Value* out =
      b.CreateLoad(b.getPtrTy(), b.CreateConstGEP1_64(b.getPtrTy(), fn->getArg(0), 1));
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
  llvm::PHINode* acc = b.CreatePHI(b.getInt64Ty(), 2);
  i->addIncoming(b.getInt64(0), entry);
  acc->addIncoming(b.getInt64(0), entry);
  llvm::Value* x = b.CreateLoad(b.getInt64Ty(), b.CreateGEP(b.getInt64Ty(), in, i));
  llvm::Value* next_acc = b.CreateAdd(acc, x);
  llvm::Value* next_i = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(next_i, loop);
  acc->addIncoming(next_acc, loop);
  b.CreateCondBr(b.CreateICmpSLT(next_i, b.getInt64(kN)), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateStore(next_acc, out);
  b.CreateRet(b.getInt32(0));
  EXPECT_FALSE(llvm::verifyModule(*m, &llvm::errs()));

  std::string err;
  const llvm::Target* backend = llvm::TargetRegistry::lookupTarget(target.triple(), err);
  EXPECT_NE(backend, nullptr) << err;
  std::unique_ptr<llvm::TargetMachine> tm(
      backend->createTargetMachine(target.triple(), target.cpu(), target.feature_string(),
                                   llvm::TargetOptions(), llvm::Reloc::PIC_));
  m->setDataLayout(tm->createDataLayout());
  m->setTargetTriple(target.triple());
  llvm::SmallVector<char, 0> obj;
  llvm::raw_svector_ostream os(obj);
  llvm::legacy::PassManager pm;
  EXPECT_FALSE(tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile));
  pm.run(*m);

  Artifact a;
  a.object.assign(obj.begin(), obj.end());
  a.entry = "sum_loop";
  a.signature = {{{kN}, "int64", false}, {{1}, "int64", true}};
  a.target = target.str();
  a.llvm_version = llvm_version();
  return a;
}

std::vector<int64_t> inputs() {
  std::vector<int64_t> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = i * 3 - 7;
  return v;
}
int64_t expected_sum() {
  auto v = inputs();
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

TEST(LlvmSmokeTest, JitLoopReturnsTheSum) {
  Kernel k = Kernel::load(sum_loop_artifact(Target::host()));
  testing::AlignedBuffer in(kN * 8), out(64);
  auto v = inputs();
  std::copy(v.begin(), v.end(), in.as<int64_t>());
  void* args[] = {in.data(), out.data()};
  out.poison(0x5A);
  ASSERT_EQ(k.run(args), 0);
  EXPECT_EQ(*out.as<int64_t>(), expected_sum());
}

TEST(LlvmSmokeTest, AArch64ObjectRunsUnderQemu) {
  if (!testing::cross_tools_available())
    GTEST_SKIP() << "aarch64-linux-gnu-g++ or qemu-aarch64-static missing";
  Artifact a = sum_loop_artifact(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  auto v = inputs();
  std::vector<uint8_t> in(reinterpret_cast<uint8_t*>(v.data()),
                          reinterpret_cast<uint8_t*>(v.data() + kN));
  auto result = testing::run_on_aarch64(a, {in, std::vector<uint8_t>(8, 0)});
  int64_t sum = 0;
  std::memcpy(&sum, result[1].data(), 8);
  EXPECT_EQ(sum, expected_sum());
}

TEST(LlvmSmokeTest, ForeignArtifactIsRefused) {
  Artifact a = sum_loop_artifact(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  try {
    Kernel::load(a);
    FAIL() << "an AArch64 object was loaded on the host";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
}

TEST(LlvmSmokeTest, GarbageObjectIsABuildError) {
  Artifact a = sum_loop_artifact(Target::host());
  a.object.resize(40);
  EXPECT_THROW(Kernel::load(a), Error);
  a = sum_loop_artifact(Target::host());
  a.entry = "no_such_symbol";
  try {
    Kernel::load(a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBuild);
  }
}

TEST(LlvmSmokeTest, ConcurrentLoadsAndRuns) {
  const Artifact a = sum_loop_artifact(Target::host());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      testing::AlignedBuffer in(kN * 8), out(64);
      auto v = inputs();
      std::copy(v.begin(), v.end(), in.as<int64_t>());
      void* args[] = {in.data(), out.data()};
      for (int i = 0; i < 250; ++i) {
        Kernel k = Kernel::load(a);
        out.poison(0x5A);  // each run must write the sum itself
        if (k.run(args) != 0 || *out.as<int64_t>() != expected_sum()) wrong++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

long rss_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// AddressSanitizer keeps freed memory in its quarantine, so RSS grows by design there (its
// LeakSanitizer checks this test's loads and frees for leaks instead).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(LlvmSmokeTest, LoadingAndFreeingTenThousandTimesDoesNotGrow) {
  if (kAddressSanitizer) GTEST_SKIP() << "RSS under ASan includes its quarantine of freed memory";
  const Artifact a = sum_loop_artifact(Target::host());
  testing::AlignedBuffer in(kN * 8), out(64);
  auto v = inputs();
  std::copy(v.begin(), v.end(), in.as<int64_t>());
  void* args[] = {in.data(), out.data()};
  for (int i = 0; i < 200; ++i) Kernel::load(a).run(args);  // warm up the JIT's own tables
  const long before = rss_kb();
  for (int i = 0; i < 10000; ++i) {
    Kernel k = Kernel::load(a);
    out.poison(0x5A);
    ASSERT_EQ(k.run(args), 0);
    ASSERT_EQ(*out.as<int64_t>(), expected_sum());
  }
  const long after = rss_kb();
  std::printf("rss before %ld kB, after 10000 load/free %ld kB\n", before, after);
  EXPECT_LT(after - before, 4 * 1024) << "RSS grew by " << (after - before) << " kB";
}

}  // namespace
}  // namespace ktune::codegen
