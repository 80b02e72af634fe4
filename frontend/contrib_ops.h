// Defines register_contrib_schemas, which registers with the ONNX library the schemas (inputs,
// types, shape inference) of the ONNX Runtime contrib operators ktune reads: com.microsoft
// QLinearAdd and QLinearGlobalAveragePool, which ONNX Runtime's quantizer writes in the QOperator
// form.
#pragma once

namespace ktune::frontend {

// Registers them once per process (later calls do nothing); thread-safe.
void register_contrib_schemas();

}  // namespace ktune::frontend
