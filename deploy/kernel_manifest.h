// Declares parse_manifest(): the JSON list of named workloads that `ktune build --manifest`
// compiles together.
#pragma once

#include <string>
#include <vector>

#include "deploy/kernel_builder.h"

namespace ktune::deploy {

// The manifest format, as `ktune build --help` states it: a JSON array of entries
//   {"name": "gemm1", "template": "matmul", "args": {"M": 512, "N": 512, "K": 512},
//    "require_tuned": true}
// name (a C identifier, unique) and template are required; args is an object of key -> number or
// string, or an array of "key=value" strings (omitted arguments take their defaults);
// require_tuned (a boolean, default false) makes a missing record an error for that kernel.
// Any other key is an error (a typo must not be ignored).
inline constexpr const char* kManifestFormat =
    R"(a JSON array of {"name": C identifier, "template": name, "args": {"M": 512, ...} or ["M=512", ...], )"
    R"("require_tuned": bool (optional)})";

// Parses the manifest text; `where` names it in errors (its path). Each request's label is
// "kernel '<name>' (entry <i>)", or "entry <i>" when the name itself is missing or not a string.
// Throws Error(kInvalidArgument) naming the entry for malformed JSON, a document that is not an
// array or is empty, an entry that is not an object, a missing or non-string name or template,
// an args value of the wrong type, a non-boolean require_tuned or an unknown key. Names are
// checked (identifier, unique) by build_kernels, templates and arguments by resolve_workload.
std::vector<KernelRequest> parse_manifest(const std::string& text, const std::string& where);

// Reads the manifest file at path and parses it. Throws Error(kIo) when it cannot be read, and
// what parse_manifest throws.
std::vector<KernelRequest> read_manifest(const std::string& path);

}  // namespace ktune::deploy
