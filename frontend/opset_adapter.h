// Defines lower_opset, which reads a model written for a default-domain opset newer than Debian's
// ONNX library knows (its newest is 17; torch.onnx's dynamo exporter writes 18, ONNX Runtime's
// block quantizer 21) by rewriting each node into its form in the library's newest opset.
#pragma once

#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
}

namespace ktune::frontend {

// The newest default-domain opset ktune reads: the library's, or up to this one through
// lower_opset (18 to 22 change parameters and types of operators that opset 17 has, and add
// operators; 23 adds operators whose forms are not lowered here).
inline constexpr int64_t kNewestReadOpset = 22;

// When `model` imports the default domain at an opset above the library's newest, rewrites every
// node (in the graph and its subgraphs) into that opset's form and lowers the IR version to the
// library's. Reads the shapes of the graph inputs as given (call it after fixing them with
// --input): a Split into equal parts and a Pad or Resize of some axes need the input's shape.
// Throws Error(kUnsupported) naming every node that has no such form (a parameter opset 17
// cannot say, an operator it lacks is left for the reader's check), and for an opset above
// kNewestReadOpset. Returns the opset the model was written for, or 0 when nothing was rewritten.
int64_t lower_opset(const std::string& path, onnx::ModelProto& model);

}  // namespace ktune::frontend
