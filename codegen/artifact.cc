// Artifact serialization: a little-endian, length-prefixed format with a trailing checksum.
#include "codegen/artifact.h"

#include <cstring>

#include "support/error.h"

namespace ktune::codegen {

namespace {

constexpr char kMagic[8] = {'K', 'T', 'U', 'N', 'E', 'A', 'R', 'T'};
constexpr uint32_t kFormatVersion = 1;
// Sanity limits: a blob from the network must not make us allocate absurd amounts.
constexpr uint64_t kMaxObjectBytes = uint64_t{1} << 31;
constexpr uint64_t kMaxString = uint64_t{1} << 20;
constexpr uint64_t kMaxArgs = 4096;
constexpr uint64_t kMaxRank = 64;
// Bytes of one argument: the runner allocates this much per argument, so a signature whose sizes
// overflow (or exceed what any workload may have, 2^48 bytes as in schedule_space) is refused.
constexpr uint64_t kMaxArgBytes = uint64_t{1} << 48;

// FNV-1a, 64 bit: catches truncation and bit flips in transit; not a security measure.
uint64_t fnv1a(const uint8_t* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

class Writer {
 public:
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(const void* p, size_t n) {
    u64(n);
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  std::vector<uint8_t>& out() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t n) : data_(data), n_(n) {}
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += 8;
    return v;
  }
  uint64_t length(uint64_t limit, const char* what) {
    uint64_t n = u64();
    if (n > limit) fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit");
    return n;
  }
  std::string str(const char* what) {
    uint64_t n = length(kMaxString, what);
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> blob(const char* what) {
    uint64_t n = length(kMaxObjectBytes, what);
    need(n);
    std::vector<uint8_t> v(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return v;
  }
  bool done() const { return pos_ == n_; }
  [[noreturn]] static void fail(const std::string& why) {
    throw Error(ErrorKind::kInvalidArgument, "malformed kernel artifact: " + why);
  }

 private:
  void need(uint64_t n) const {
    if (n > n_ - pos_)
      fail("truncated (need " + std::to_string(n) + " more bytes at offset " +
           std::to_string(pos_) + ")");
  }
  const uint8_t* data_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace

int64_t ArgSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ArgSpec::element_bytes() const {
  if (dtype == "float32" || dtype == "int32" || dtype == "uint32") return 4;
  if (dtype == "float64" || dtype == "int64" || dtype == "uint64") return 8;
  if (dtype == "float16" || dtype == "int16" || dtype == "uint16" || dtype == "bfloat16") return 2;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  throw Error(ErrorKind::kInvalidArgument, "unknown dtype '" + dtype + "'");
}

std::vector<uint8_t> Artifact::serialize() const {
  Writer w;
  w.bytes(kMagic, sizeof(kMagic));
  w.u64(kFormatVersion);
  w.bytes(object.data(), object.size());
  w.str(entry);
  w.str(target);
  w.str(llvm_version);
  w.u64(signature.size());
  for (const ArgSpec& a : signature) {
    w.u64(a.shape.size());
    for (int64_t d : a.shape) w.u64(static_cast<uint64_t>(d));
    w.str(a.dtype);
    w.u64(a.is_output ? 1 : 0);
  }
  std::vector<uint8_t>& out = w.out();
  const uint64_t sum = fnv1a(out.data(), out.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(sum >> (8 * i)));
  return std::move(out);
}

Artifact Artifact::deserialize(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 8 + 8 + 8 + 8)
    Reader::fail("too short (" + std::to_string(bytes.size()) + " bytes)");
  const size_t body = bytes.size() - 8;
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= uint64_t{bytes[body + i]} << (8 * i);
  Reader r(bytes.data(), body);
  if (r.str("magic") != std::string(kMagic, sizeof(kMagic))) Reader::fail("bad magic");
  const uint64_t version = r.u64();
  if (version != kFormatVersion)
    Reader::fail("unsupported format version " + std::to_string(version));
  if (fnv1a(bytes.data(), body) != stored) Reader::fail("checksum mismatch");
  Artifact a;
  a.object = r.blob("object");
  a.entry = r.str("entry");
  a.target = r.str("target");
  a.llvm_version = r.str("llvm_version");
  const uint64_t nargs = r.length(kMaxArgs, "signature");
  for (uint64_t i = 0; i < nargs; ++i) {
    ArgSpec s;
    const uint64_t rank = r.length(kMaxRank, "shape");
    for (uint64_t d = 0; d < rank; ++d) {
      const auto v = static_cast<int64_t>(r.u64());
      if (v < 0) Reader::fail("negative extent");
      s.shape.push_back(v);
    }
    s.dtype = r.str("dtype");
    uint64_t bytes = 0;
    try {
      bytes = static_cast<uint64_t>(s.element_bytes());
    } catch (const Error&) {
      Reader::fail("unknown dtype '" + s.dtype.substr(0, 80) + "'");
    }
    for (int64_t d : s.shape) {
      const auto extent = static_cast<uint64_t>(d);
      if (extent != 0 && bytes > kMaxArgBytes / extent)
        Reader::fail("an argument of more than 2^48 bytes");
      bytes *= extent;
    }
    const uint64_t out = r.u64();
    if (out > 1) Reader::fail("bad is_output flag");
    s.is_output = out == 1;
    a.signature.push_back(std::move(s));
  }
  if (!r.done()) Reader::fail("trailing bytes");
  if (a.entry.empty()) Reader::fail("empty entry symbol");
  return a;
}

}  // namespace ktune::codegen
