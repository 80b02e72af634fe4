// Target parsing and host detection through LLVM's target registry and subtarget tables.
#include "codegen/target.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm_init.h"
#include "support/error.h"
#include "support/json_input.h"

namespace ktune::codegen {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

namespace {

// -num-cores above this is a typo, not a machine (and would size thread pools and knobs).
constexpr int kMaxCores = 1024;

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

const llvm::Target& lookup_backend(const std::string& triple) {
  initialize_llvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!t) {
    std::vector<std::string> names;
    for (const llvm::Target& known : llvm::TargetRegistry::targets())
      names.push_back(known.getName());
    std::sort(names.begin(), names.end());
    throw Error(ErrorKind::kUnsupported,
                "unknown target triple '" + quote_input(triple) + "' (" + err +
                    "); this LLVM knows the architectures: " + join(names, ", "));
  }
  return *t;
}

// Subtarget info with no CPU or features: the tables of what the triple's backend knows,
// created without warnings (LLVM prints one to stderr for an unknown CPU or feature).
std::unique_ptr<llvm::MCSubtargetInfo> tables_for(const std::string& triple) {
  const llvm::Target& backend = lookup_backend(triple);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(backend.createMCSubtargetInfo(triple, "", ""));
  if (!sti) throw Error(ErrorKind::kUnsupported, "LLVM has no subtarget info for '" + triple + "'");
  return sti;
}

std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const std::string& triple, const std::string& cpu,
                                                 const std::string& features) {
  const llvm::Target& backend = lookup_backend(triple);
  return std::unique_ptr<llvm::MCSubtargetInfo>(
      backend.createMCSubtargetInfo(triple, cpu, features));
}

bool has_feature(const llvm::MCSubtargetInfo& sti, const std::string& name) {
  for (const auto& kv : sti.getAllProcessorFeatures()) {
    if (name == kv.Key) return sti.checkFeatures("+" + name);
  }
  return false;
}

int detect_vector_bits(const std::string& triple, const llvm::MCSubtargetInfo& sti) {
  llvm::Triple tt(triple);
  if (tt.isX86()) {
    if (has_feature(sti, "avx512f")) return 512;
    if (has_feature(sti, "avx")) return 256;
    return 128;
  }
  if (tt.isAArch64()) return 128;  // NEON; SVE lengths are not known at compile time
  if (tt.isARM()) return has_feature(sti, "neon") ? 128 : 32;
  return 128;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string tok; in >> tok;) out.push_back(tok);
  return out;
}

}  // namespace

Target Target::host() {
  initialize_llvm();
  Target t;
  t.triple_ = llvm::Triple::normalize(llvm::sys::getProcessTriple());
  t.cpu_ = llvm::sys::getHostCPUName().str();
  auto defaults = subtarget(t.triple_, t.cpu_, "");
  // Record only where the host differs from its CPU model's defaults (a VM that hides
  // AVX-512, say), so the canonical string stays short and stable.
  const auto host_features = llvm::sys::getHostCPUFeatures();
  for (const auto& kv : defaults->getAllProcessorFeatures()) {
    auto it = host_features.find(kv.Key);
    if (it == host_features.end()) continue;
    std::string name = kv.Key;
    if (it->second != defaults->checkFeatures("+" + name)) {
      t.attributes_.push_back((it->second ? "+" : "-") + name);
    }
  }
  std::sort(t.attributes_.begin(), t.attributes_.end());
  t.vector_bits_ = detect_vector_bits(t.triple_, *subtarget(t.triple_, t.cpu_, t.feature_string()));
  t.cores_ = std::max(1u, std::thread::hardware_concurrency());
  return t;
}

Target Target::parse(const std::string& text) {
  std::vector<std::string> tokens = split_ws(text);
  if (tokens.size() == 1 && (tokens[0] == "host" || tokens[0] == "llvm")) return host();
  if (tokens.empty() || tokens[0] != "llvm") {
    throw Error(ErrorKind::kInvalidArgument,
                "target '" + quote_input(text) +
                    "' must be 'host' or start with 'llvm' (e.g. 'llvm "
                    "-mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon')");
  }
  std::string triple, cpu, attrs, cores;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    auto value_of = [&](const std::string& key, std::string& slot) {
      if (tok.rfind(key + "=", 0) != 0) return false;
      // A repeated option would silently override the first: refuse it.
      if (!slot.empty())
        throw Error(ErrorKind::kInvalidArgument,
                    key + " given twice in target '" + quote_input(text) + "'");
      slot = tok.substr(key.size() + 1);
      if (slot.empty())
        throw Error(ErrorKind::kInvalidArgument,
                    "empty value for " + key + " in target '" + quote_input(text) + "'");
      return true;
    };
    if (!value_of("-mtriple", triple) && !value_of("-mcpu", cpu) && !value_of("-mattr", attrs) &&
        !value_of("-num-cores", cores)) {
      throw Error(ErrorKind::kInvalidArgument,
                  "unknown target option '" + quote_input(tok) + "' in '" + quote_input(text) +
                      "' (known: -mtriple=, -mcpu=, -mattr=, -num-cores=)");
    }
  }
  initialize_llvm();
  const bool host_triple = triple.empty();
  Target t;
  t.triple_ = llvm::Triple::normalize(host_triple ? llvm::sys::getProcessTriple() : triple);
  if (cpu.empty()) cpu = host_triple ? llvm::sys::getHostCPUName().str() : "generic";
  t.cpu_ = cpu;

  auto tables = tables_for(t.triple_);
  if (cpu != "generic" && !tables->isCPUStringValid(cpu)) {
    std::vector<std::string> names;
    for (const auto& kv : tables->getAllProcessorDescriptions()) names.push_back(kv.Key);
    throw Error(ErrorKind::kInvalidArgument, "unknown CPU '" + quote_input(cpu) + "' for triple '" +
                                                 t.triple_ + "'; known CPUs: " + join(names, ", "));
  }
  std::stringstream attr_stream(attrs);
  for (std::string a; std::getline(attr_stream, a, ',');) {
    if (a.empty()) continue;
    if (a[0] != '+' && a[0] != '-') a = "+" + a;
    const std::string name = a.substr(1);
    bool known = false;
    for (const auto& kv : tables->getAllProcessorFeatures()) known = known || name == kv.Key;
    if (!known) {
      std::vector<std::string> names;
      for (const auto& kv : tables->getAllProcessorFeatures()) names.push_back(kv.Key);
      throw Error(ErrorKind::kInvalidArgument, "unknown attribute '" + quote_input(name) +
                                                   "' for triple '" + t.triple_ +
                                                   "'; known attributes: " + join(names, ", "));
    }
    // Drop attributes the CPU implies anyway, so equal targets have one canonical string.
    auto defaults = subtarget(t.triple_, t.cpu_, "");
    if (defaults->checkFeatures(a)) continue;
    t.attributes_.push_back(a);
  }
  std::sort(t.attributes_.begin(), t.attributes_.end());
  t.attributes_.erase(std::unique(t.attributes_.begin(), t.attributes_.end()), t.attributes_.end());
  t.vector_bits_ = detect_vector_bits(t.triple_, *subtarget(t.triple_, t.cpu_, t.feature_string()));
  if (!cores.empty()) {
    try {
      size_t used = 0;
      t.cores_ = std::stoi(cores, &used);
      if (used != cores.size() || t.cores_ < 1 || t.cores_ > kMaxCores)
        throw std::invalid_argument(cores);
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidArgument, "-num-cores must be an integer from 1 to " +
                                                   std::to_string(kMaxCores) + ", got '" +
                                                   quote_input(cores) + "'");
    }
    t.explicit_cores_ = true;
  } else {
    t.cores_ = t.is_host_compatible() ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  }
  return t;
}

std::string Target::feature_string() const { return join(attributes_, ","); }

std::string Target::str() const {
  std::string s = "llvm -mtriple=" + triple_ + " -mcpu=" + cpu_;
  if (!attributes_.empty()) s += " -mattr=" + feature_string();
  if (explicit_cores_) s += " -num-cores=" + std::to_string(cores_);
  return s;
}

namespace {

// x86 system instructions: LLVM emits them only for their intrinsics, which no ktune kernel calls,
// so a host without them still runs the code. Virtual machines hide several (a Zen 5 guest may
// lack rdseed, rdpid, xsaves, shstk and invpcid that -mcpu=znver4 implies), and a record tuned
// on one CPU model must stay runnable on a newer one. Also AMD's SSE4a (EXTRQ, INSERTQ, MOVNTSS,
// MOVNTSD): LLVM emits it for its intrinsics and for non-temporal scalar stores, neither of which
// a kernel has; an Intel host with the same AVX-512 lacks it (a Xeon guest runs a Zen 4 pack).
bool never_emitted_by_kernels(const std::string& feature) {
  static const std::set<std::string> kSystem = {
      "clflushopt", "cldemote", "clwb",  "clzero",    "enqcmd",   "fsgsbase", "hreset",
      "invpcid",    "kl",       "lwp",   "movdir64b", "movdiri",  "mwaitx",   "pconfig",
      "pku",        "ptwrite",  "rdpid", "rdpru",     "rdrnd",    "rdseed",   "rtm",
      "serialize",  "sgx",      "shstk", "sse4a",     "tsxldtrk", "uintr",    "waitpkg",
      "wbnoinvd",   "widekl",   "xsave", "xsavec",    "xsaveopt", "xsaves"};
  return kSystem.count(feature) > 0;
}

}  // namespace

bool Target::is_host_compatible() const {
  initialize_llvm();
  llvm::Triple mine(triple_), host(llvm::sys::getProcessTriple());
  if (mine.getArch() != host.getArch() || mine.getOS() != host.getOS()) return false;
  auto sti = subtarget(triple_, cpu_, feature_string());
  // Only ISA features the host reports matter; tuning flags in the table do not.
  for (const auto& kv : llvm::sys::getHostCPUFeatures()) {
    const std::string feature = kv.getKey().str();
    if (!kv.second && has_feature(*sti, feature) && !never_emitted_by_kernels(feature))
      return false;
  }
  return true;
}

std::string llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace ktune::codegen
