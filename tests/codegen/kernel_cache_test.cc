// Tests the kernel cache: build() reads back the object it stored for the same kernel and target
// (and that object computes the reference), other targets and options miss, a damaged entry is
// built again, and a folder others may write to is refused. (ktune's reading of
// KTUNE_KERNEL_CACHE: tests/deploy/build_cli_test.cc.)
#include "codegen/kernel_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::codegen {
namespace {

namespace fs = std::filesystem;

// The folder of the cache build() uses in this program (the library's is off until set).
const fs::path kFolder =
    fs::temp_directory_path() / ("ktune_kernel_cache_" + std::to_string(::getpid()));

struct RemoveFolder {
  ~RemoveFolder() {
    std::error_code ec;
    fs::remove_all(kFolder, ec);
  }
} remove_folder;

constexpr int64_t kRows = 23, kCols = 31;

// C = A * scale + B: scale varies the kernel (and so its IR).
te::LoweredFunc axpb(float scale) {
  te::Tensor A = te::placeholder({kRows, kCols}, te::Float(32), "A");
  te::Tensor B = te::placeholder({kRows, kCols}, te::Float(32), "B");
  te::Tensor C = te::compute(
      {kRows, kCols},
      [&](const std::vector<te::Var>& i) { return A(i[0], i[1]) * scale + B(i[0], i[1]); }, "C");
  te::Schedule s = te::create_schedule({C});
  return te::lower(s, {A, B, C}, "axpb");
}

std::vector<fs::path> entries(const fs::path& folder) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.path().filename().string().rfind("llvmcache-", 0) == 0 &&
        e.path().filename().string().rfind("llvmcache-tmp-", 0) != 0)
      found.push_back(e.path());
  return found;
}

void expect_computes_axpb(const Artifact& artifact, float scale) {
  const Kernel kernel = Kernel::load(artifact);
  std::vector<float> a(kRows * kCols), b(kRows * kCols),
      c(kRows * kCols, std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = 0.5f * static_cast<float>(i % 13), b[i] = -2.0f + static_cast<float>(i % 7);
  ASSERT_EQ(kernel.run({a.data(), b.data(), c.data()}), 0);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], a[i] * scale + b[i]) << "element " << i;
}

TEST(KernelCache, ABuildIsStoredAndTheSameKernelReadsItBack) {
  KernelCache::use_folder(kFolder.string(), true);
  EXPECT_FALSE(fs::exists(kFolder)) << "opened when a kernel is first built";
  ASSERT_EQ(KernelCache::of_process().dir(), kFolder.string());
  const Artifact first = build(axpb(3.0f), Target::host());
  const std::vector<fs::path> stored = entries(kFolder);
  ASSERT_EQ(stored.size(), 1u);
  // The folder is the owner's alone: others could plant code in it otherwise.
  struct stat st {};
  ASSERT_EQ(::stat(kFolder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // Read back: the same bytes, not a second entry.
  const Artifact second = build(axpb(3.0f), Target::host());
  EXPECT_EQ(second, first);
  EXPECT_EQ(entries(kFolder).size(), 1u);
  expect_computes_axpb(second, 3.0f);

  // Another kernel, another target, other options: entries of their own.
  expect_computes_axpb(build(axpb(5.0f), Target::host()), 5.0f);
  EXPECT_EQ(entries(kFolder).size(), 2u);
  build(axpb(3.0f), Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  EXPECT_EQ(entries(kFolder).size(), 3u);
  BuildOptions o1;
  o1.opt_level = 1;
  expect_computes_axpb(build(axpb(3.0f), Target::host(), o1), 3.0f);
  EXPECT_EQ(entries(kFolder).size(), 4u);
  // build_all() shares the entries of build().
  const std::vector<Artifact> all = build_all({axpb(3.0f), axpb(5.0f)}, Target::host());
  EXPECT_EQ(all[0], first);
  EXPECT_EQ(entries(kFolder).size(), 4u);
}

TEST(KernelCache, AnEntryThatIsNotTheKernelsObjectIsBuiltAgain) {
  const fs::path folder = kFolder / "damaged";
  const KernelCache cache(folder.string());
  fs::create_directories(folder);
  const std::vector<uint8_t> bytes = build(axpb(7.0f), Target::host()).object;
  const std::string object(bytes.begin(), bytes.end());
  int compiled = 0;
  const auto compile = [&] {
    ++compiled;
    return object;
  };
  EXPECT_EQ(cache.object("k1", "axpb", compile), object);
  EXPECT_EQ(cache.object("k1", "axpb", compile), object);
  EXPECT_EQ(compiled, 1);
  // Cut short (a full disk), garbage, or an object without the entry: built again and replaced.
  for (const std::string& bad : {object.substr(0, object.size() / 2), std::string(64, 'x')}) {
    std::ofstream(folder / "llvmcache-k1", std::ios::binary | std::ios::trunc) << bad;
    EXPECT_EQ(cache.object("k1", "axpb", compile), object);
    EXPECT_EQ(cache.object("k1", "axpb", compile), object);
  }
  EXPECT_EQ(compiled, 3);
  EXPECT_EQ(cache.object("k1", "another_entry", compile), object);
  EXPECT_EQ(compiled, 4);
  // A compile that throws stores nothing.
  EXPECT_THROW(cache.object("k2", "axpb", []() -> std::string { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(folder / "llvmcache-k2"));
}

TEST(KernelCache, AFolderOthersMayWriteToIsRefusedAndAMissingOneIsMadePrivate) {
  const fs::path open_folder = kFolder / "open";
  fs::create_directories(open_folder);
  fs::permissions(open_folder, fs::perms::all, fs::perm_options::replace);
  EXPECT_FALSE(KernelCache::open(open_folder.string(), true).enabled());
  fs::permissions(open_folder, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec,
                  fs::perm_options::replace);
  EXPECT_EQ(KernelCache::open(open_folder.string(), true).dir(), open_folder.string());

  const fs::path fresh = kFolder / "a" / "b";
  EXPECT_EQ(KernelCache::open(fresh.string(), false).dir(), fresh.string());
  EXPECT_EQ(fs::status(fresh).permissions() & fs::perms::all, fs::perms::owner_all);
  // A folder that cannot be made (under a file).
  std::ofstream(kFolder / "file") << "x";
  EXPECT_FALSE(KernelCache::open((kFolder / "file" / "kernels").string(), false).enabled());
}

}  // namespace
}  // namespace ktune::codegen
