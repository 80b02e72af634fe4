// KernelCache: its folder's ownership check, atomic entries, pruning.
#include "codegen/kernel_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>

#include <llvm/ADT/StringRef.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/CachePruning.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBufferRef.h>
#include <spdlog/spdlog.h>

namespace ktune::codegen {

namespace {

namespace fs = std::filesystem;

// pruneCache() only ever deletes files named so, a guard against a cache folder set to one that
// holds anything else.
constexpr const char* kEntryPrefix = "llvmcache-";

// Why dir cannot hold code this process will run ("" when it can), creating it (owner only) if
// missing.
std::string unusable(const std::string& dir) {
  std::error_code ec;
  if (fs::create_directories(dir, ec))
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) return "cannot create it: " + ec.message();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "it is not a folder";
  if (st.st_uid != ::geteuid()) return "another user owns it";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "group or others may write to it";
  return "";
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return bytes;
}

// True when bytes are an object file that defines entry (an entry cut short by a full disk, or
// anything else put there, is not used).
bool defines(const std::string& bytes, const std::string& entry) {
  auto object = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, entry));
  if (!object) {
    llvm::consumeError(object.takeError());
    return false;
  }
  for (const llvm::object::SymbolRef& symbol : (*object)->symbols()) {
    auto name = symbol.getName();
    auto section = symbol.getSection();
    if (!name || !section) {
      if (!name) llvm::consumeError(name.takeError());
      if (!section) llvm::consumeError(section.takeError());
      continue;
    }
    if (*name == entry && *section != (*object)->section_end()) return true;
  }
  return false;
}

llvm::CachePruningPolicy pruning_policy() {
  llvm::CachePruningPolicy policy;
  policy.Interval = std::chrono::minutes(20);
  policy.Expiration = std::chrono::hours(30 * 24);
  policy.MaxSizeBytes = uint64_t{1} << 30;
  return policy;
}

// Writes bytes as dir/<kEntryPrefix><key>: a temporary file renamed into place, so a reader sees
// a whole entry or none. Returns why it failed, "" when stored.
std::string store(const std::string& dir, const std::string& key, const std::string& bytes) {
  static std::atomic<uint64_t> count{0};
  const std::string tmp = dir + "/" + kEntryPrefix + "tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(count++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      return "cannot write " + tmp;
    }
  }
  std::error_code ec;
  fs::rename(tmp, dir + "/" + kEntryPrefix + key, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "cannot rename " + tmp + ": " + ec.message();
  }
  return "";
}

}  // namespace

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

KernelCache KernelCache::open(const std::string& dir, bool named) {
  if (dir.empty()) return KernelCache("");
  const std::string why = unusable(dir);
  if (why.empty()) return KernelCache(dir);
  const bool warn = named || why.rfind("cannot create", 0) != 0;
  spdlog::log(warn ? spdlog::level::warn : spdlog::level::debug,
              "kernel cache off: {}: {} (KTUNE_KERNEL_CACHE names a folder of yours, or off)", dir,
              why);
  return KernelCache("");
}

namespace {
// The folder use_folder() names (set at the program's start, before any thread builds a kernel)
// and the cache opened from it on first use.
struct ProcessCache {
  std::string dir;
  bool named = false;
  std::once_flag opened;
  KernelCache cache;
};

ProcessCache& process_cache() {
  static ProcessCache process;
  return process;
}
}  // namespace

const KernelCache& KernelCache::of_process() {
  ProcessCache& p = process_cache();
  std::call_once(p.opened, [&p] { p.cache = open(p.dir, p.named); });
  return p.cache;
}

void KernelCache::use_folder(std::string dir, bool named) {
  process_cache().dir = std::move(dir);
  process_cache().named = named;
}

std::string KernelCache::object(const std::string& key, const std::string& entry,
                                const std::function<std::string()>& compile) const {
  if (!enabled()) return compile();
  const std::string path = dir_ + "/" + kEntryPrefix + key;
  if (std::optional<std::string> kept = read_file(path)) {
    if (defines(*kept, entry)) return std::move(*kept);
    spdlog::debug("kernel cache: {} is not an object defining {}; building it again", path, entry);
  }
  std::string object = compile();
  if (const std::string why = store(dir_, key, object); !why.empty())
    spdlog::debug("kernel cache: {}", why);
  else
    llvm::pruneCache(dir_, pruning_policy());
  return object;
}

}  // namespace ktune::codegen
