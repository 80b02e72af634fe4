// Declares build_kernels(): named workloads -> their best logged configs (or fallbacks) compiled in
// one LLVM session.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "codegen/artifact.h"
#include "deploy/config_choice.h"
#include "deploy/history_lookup.h"
#include "deploy/kernel_header.h"
#include "rpc_runner/client/service_client.h"

namespace ktune::deploy {

// One kernel to build: a workload and the C symbol it gets.
struct KernelRequest {
  std::string name;  // the kernel's symbol, a C identifier
  std::string template_name;
  std::vector<std::string> args;  // key=value; omitted ones take their defaults
  bool require_tuned = false;     // no record of the workload is an error, not the fallback
  // How an error names this kernel ("kernel 'gemm1' (entry 0)"); "" = errors as they are.
  std::string label;
};

// Where the configs come from and what the kernels are compiled for.
struct KernelSource {
  std::string target = "host";              // "host" or a TVM-style target string
  std::string db = "ktune.db";              // the tuning log; one that does not exist is an error
  rpc_runner::ServiceClientOptions server;  // set: ask this server instead of db
  bool untuned = false;                     // read no log: every kernel on its fallback config
  std::string device_key;                   // with server: records of this device key only
  bool emulated = false;                    // records of emulated devices are eligible too
};

// A compiled kernel and where its config came from.
struct BuiltKernel {
  BuiltKernel(KernelRequest r, Workload w) : request(std::move(r)), workload(std::move(w)) {}

  KernelRequest request;
  Workload workload;
  deploy::ConfigChoice choice;  // the config built, and where it came from
  codegen::Artifact artifact;
  std::vector<std::string> tensor_names;  // of the kernel arguments, in call order
  KernelProvenance provenance;            // what its header says

  // "tuned", "nearest" or "fallback".
  std::string config_source() const;
};

// Builds every request for source.target: each workload resolved first (so a bad entry stops the
// build before any look-up), then each one's best record looked up (a missing record means the
// nearest tuned shape's config or the template's fallback, unless require_tuned), then all of
// them compiled by codegen::build_all in one LLVM session. Warns on stderr when a served record was
// timed on an emulated device or with another LLVM. Returns the kernels in request order.
// Throws, with the request's label before the message: Error(kInvalidArgument) for a name that is
// not a C identifier, two requests of one name, an unknown template or argument, a bad target
// string, an empty db without a server or --device-key without a server; Error(kUnsupported) for a
// triple with no backend; Error(kNotFound) for a log that does not exist or require_tuned without
// a record; what the look-up and codegen throw.
std::vector<BuiltKernel> build_kernels(const std::vector<KernelRequest>& requests,
                                       const KernelSource& source);

}  // namespace ktune::deploy
