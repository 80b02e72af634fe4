// The ktune-runner child: runs one candidate kernel at a time in its own address space.
#include "rpc_runner/runner/runner_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "codegen/artifact.h"
#include "codegen/generated_call.h"
#include "codegen/runtime.h"
#include "codegen/shared_object.h"
#include "rpc_runner/runner/input_data.h"
#include "rpc_runner/runner/runner_protocol.h"
#include "support/placed_buffer.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

// A 64-byte aligned byte buffer (the kernel ABI's alignment), a large one on huge pages as a
// model's weights and arena are (support/placed_buffer.h): what is timed is what ships.
struct Buffer {
  PlacedBuffer data;
  size_t bytes = 0;

  explicit Buffer(size_t n) : bytes(n) {
    try {
      data = make_placed(static_cast<int64_t>(n));
    } catch (const Error& e) {
      throw Error(ErrorKind::kRun, e.what());
    }
  }
  uint8_t* get() const { return static_cast<uint8_t*>(data.get()); }
};

struct Workspace {
  codegen::Artifact artifact;
  std::vector<Buffer> buffers;
  std::vector<void*> args;
};

Workspace prepare(const std::vector<uint8_t>& blob, uint64_t seed) {
  Workspace ws;
  ws.artifact = codegen::Artifact::deserialize(blob);
  for (size_t i = 0; i < ws.artifact.signature.size(); ++i) {
    const auto& spec = ws.artifact.signature[i];
    ws.buffers.emplace_back(static_cast<size_t>(spec.num_elements() * spec.element_bytes()));
    Buffer& b = ws.buffers.back();
    if (spec.is_output)
      std::memset(b.get(), 0xFF, b.bytes);  // NaN / -1: an unwritten output is caught
    else
      fill_input(b.get(), b.bytes, spec.dtype, seed, i);
    ws.args.push_back(b.get());
  }
  return ws;
}

struct Reference {
  std::vector<codegen::ArgSpec> signature;
  std::vector<std::vector<uint8_t>> outputs;  // one per output arg, in signature order
};

// Floating outputs: |got - ref| <= atol + rtol * (|ref| + rms(ref)). The rms term scales the
// tolerance to the output as a whole: a reduction summed in another order (a reordered or
// split reduction axis) differs by rounding that grows with the output's magnitude, not with
// the element's, so an element that happens to sum to nearly zero must not fail on it. A real
// indexing bug errs by the order of the values themselves and still fails.
template <typename T>
std::string compare_typed(const uint8_t* got_raw, const uint8_t* ref_raw, size_t bytes, double rtol,
                          double atol, bool floating) {
  const T* got = reinterpret_cast<const T*>(got_raw);
  const T* ref = reinterpret_cast<const T*>(ref_raw);
  size_t n = bytes / sizeof(T);
  double sum_squares = 0;
  size_t finite = 0;
  for (size_t i = 0; floating && i < n; ++i) {
    double r = static_cast<double>(ref[i]);
    if (std::isfinite(r)) sum_squares += r * r, ++finite;
  }
  const double rms = finite > 0 ? std::sqrt(sum_squares / static_cast<double>(finite)) : 0;
  for (size_t i = 0; i < n; ++i) {
    double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
    bool ok = floating ? (std::isfinite(g) || !std::isfinite(r)) &&
                             std::fabs(g - r) <= atol + rtol * (std::fabs(r) + rms)
                       : got[i] == ref[i];
    if (!ok)
      return "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " +
             std::to_string(r) + " (output rms " + std::to_string(rms) + ")";
  }
  return "";
}

// Returns "" when equal within tolerance, else where they first differ.
std::string compare(const std::string& dtype, const Buffer& got, const std::vector<uint8_t>& ref,
                    double rtol, double atol) {
  if (got.bytes != ref.size()) return "output size differs from the reference";
  if (dtype == "float32")
    return compare_typed<float>(got.get(), ref.data(), ref.size(), rtol, atol, true);
  if (dtype == "float64")
    return compare_typed<double>(got.get(), ref.data(), ref.size(), rtol, atol, true);
  if (std::memcmp(got.get(), ref.data(), ref.size()) == 0) return "";
  return "integer output differs from the reference";
}

class Service {
 public:
  explicit Service(const KernelLoader& loader)
      : loader_(loader), default_threads_(codegen::num_threads()) {}

  Reply handle(const Request& request) {
    Reply reply;
    try {
      if (request.type == RequestType::kReference)
        load_reference(request);
      else if (request.measure.return_outputs)
        reply = prove(request);
      else
        reply.costs = measure(request);
    } catch (const Error& e) {
      reply.error = e.kind();
      reply.message = e.what();
    } catch (const std::exception& e) {
      reply.error = ErrorKind::kUnknown;
      reply.message = e.what();
    }
    return reply;
  }

 private:
  LoadedKernel load(const codegen::Artifact& artifact) const {
    try {
      return loader_(artifact);
    } catch (const Error& e) {
      // Code for another architecture is the device's answer, not a broken kernel.
      if (e.kind() == ErrorKind::kUnsupported) throw;
      throw Error(ErrorKind::kBuild, std::string("cannot load kernel: ") + e.what());
    }
  }

  void load_reference(const Request& request) {
    Workspace ws = prepare(request.artifact, request.measure.data_seed);
    LoadedKernel kernel = load(ws.artifact);
    int32_t status = codegen::call_generated(kernel.fn, ws.args.data());
    if (status != 0)
      throw Error(ErrorKind::kRun, "reference kernel returned " + std::to_string(status));
    Reference ref;
    ref.signature = ws.artifact.signature;
    for (size_t i = 0; i < ws.buffers.size(); ++i) {
      if (!ref.signature[i].is_output) continue;
      const Buffer& b = ws.buffers[i];
      ref.outputs.emplace_back(b.get(), b.get() + b.bytes);
    }
    references_[request.reference_key] = std::move(ref);
  }

  // One timed run, its outputs returned: a server's calibration proof (it checks them itself).
  Reply prove(const Request& request) {
    codegen::set_num_threads(request.measure.run_threads > 0 ? request.measure.run_threads
                                                             : default_threads_);
    Workspace ws = prepare(request.artifact, request.measure.data_seed);
    LoadedKernel kernel = load(ws.artifact);
    const auto start = Clock::now();
    const int32_t status = codegen::call_generated(kernel.fn, ws.args.data());
    if (status != 0)
      throw Error(ErrorKind::kRun, "kernel returned status " + std::to_string(status));
    Reply reply;
    reply.costs = {std::chrono::duration<double>(Clock::now() - start).count()};
    for (size_t i = 0; i < ws.buffers.size(); ++i)
      if (ws.artifact.signature[i].is_output)
        reply.outputs.append(reinterpret_cast<const char*>(ws.buffers[i].get()),
                             ws.buffers[i].bytes);
    return reply;
  }

  std::vector<double> measure(const Request& request) {
    const tuner::MeasureOptions& t = request.measure;
    // Every request sets its count: this process serves many candidates, and one timed on one
    // thread (a worker's calibration) must not leave the next ones there.
    codegen::set_num_threads(t.run_threads > 0 ? t.run_threads : default_threads_);
    Workspace ws = prepare(request.artifact, request.measure.data_seed);
    LoadedKernel kernel = load(ws.artifact);

    // One checked run first; it also warms the caches and the code.
    auto run_once = [&] {
      int32_t status = codegen::call_generated(kernel.fn, ws.args.data());
      if (status != 0)
        throw Error(ErrorKind::kRun, "kernel returned status " + std::to_string(status));
    };
    run_once();
    if (t.check_correctness) check(request, ws);

    int number = std::max(1, t.number);
    auto time_runs = [&](int runs) {
      double total = 0;
      if (t.flush_cache) {
        for (int i = 0; i < runs; ++i) {
          flush();
          auto s = Clock::now();
          run_once();
          total += std::chrono::duration<double>(Clock::now() - s).count();
        }
      } else {
        auto s = Clock::now();
        for (int i = 0; i < runs; ++i) run_once();
        total = std::chrono::duration<double>(Clock::now() - s).count();
      }
      return total;
    };
    if (t.min_repeat_ms > 0) {
      // Grow `number` until one timing lasts min_repeat_ms (TVM's rule: at least x1.618).
      for (int guard = 0; guard < 64; ++guard) {
        double ms = time_runs(number) * 1e3;
        if (ms >= t.min_repeat_ms) break;
        double per_run = std::max(ms / number, 1e-6);
        number = std::max(static_cast<int>(std::ceil(t.min_repeat_ms / per_run)),
                          static_cast<int>(std::ceil(number * 1.618)));
      }
    }
    std::vector<double> costs;
    for (int r = 0; r < std::max(1, t.repeat); ++r) {
      if (r > 0 && t.cooldown_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(t.cooldown_s));
      costs.push_back(time_runs(number) / number);
    }
    return costs;
  }

  void check(const Request& request, const Workspace& ws) const {
    auto it = references_.find(request.reference_key);
    if (it == references_.end())
      throw Error(ErrorKind::kUnknown, "no reference for " + request.reference_key);
    const Reference& ref = it->second;
    if (ref.signature != ws.artifact.signature)
      throw Error(ErrorKind::kWrongAnswer, "signature differs from the reference");
    size_t out = 0;
    for (size_t i = 0; i < ws.buffers.size(); ++i) {
      if (!ref.signature[i].is_output) continue;
      std::string diff = compare(ref.signature[i].dtype, ws.buffers[i], ref.outputs[out++],
                                 request.measure.rtol, request.measure.atol);
      if (!diff.empty())
        throw Error(ErrorKind::kWrongAnswer, "output " + std::to_string(i) + " " + diff);
    }
  }

  // Evicts the data caches by writing a buffer larger than the last-level cache.
  void flush() {
    constexpr size_t kFlushBytes = size_t{64} << 20;
    if (flush_.empty()) flush_.resize(kFlushBytes);
    ++flush_round_;
    for (size_t i = 0; i < flush_.size(); i += 64)
      flush_[i] = static_cast<uint8_t>(flush_round_ + i);
  }

  const KernelLoader& loader_;
  const int default_threads_;  // this process's count at start: the CPUs it may run on
  std::map<std::string, Reference> references_;
  std::vector<uint8_t> flush_;
  uint8_t flush_round_ = 0;
};

}  // namespace

KernelLoader make_kernel_loader(KernelLoader jit) {
  return [jit = std::move(jit)](const codegen::Artifact& artifact) {
    if (codegen::is_shared_object(artifact.object) || !jit) {
      auto kernel = std::make_shared<codegen::SharedKernel>(codegen::SharedKernel::load(artifact));
      return LoadedKernel{kernel->entry(), kernel};
    }
    return jit(artifact);
  };
}

int serve(int fd, const KernelLoader& load) {
  Service service(load);
  for (;;) {
    std::optional<std::vector<uint8_t>> frame;
    Request request;
    try {
      frame = read_frame(fd);
      if (!frame) return 0;
      request = decode_request(*frame);
    } catch (const std::exception& e) {
      spdlog::error("ktune-runner: {}", e.what());
      return 2;
    }
    Reply reply = service.handle(request);
    try {
      write_frame(fd, encode(reply));
    } catch (const std::exception& e) {
      spdlog::error("ktune-runner: {}", e.what());
      return 2;
    }
  }
}

}  // namespace ktune::rpc_runner
