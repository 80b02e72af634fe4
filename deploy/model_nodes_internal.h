// Declares what model_nodes.cc and model_nodes_data.cc share: reading a node's shapes, operands
// and integer parameters (attributes before an opset, constant inputs after), and the data
// movement nodes' steps. Private to those files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deploy/model_nodes.h"
#include "support/error.h"

namespace ktune::deploy::nodes {

Error unsupported(const frontend::Node& n, const std::string& why);

// The fully known shape of `tensor`; throws unsupported naming the node otherwise.
std::vector<int64_t> shape_of(const frontend::Graph& g, const frontend::Node& n,
                              const std::string& tensor);

int64_t count_of(const std::vector<int64_t>& shape);

// The operand `tensor`: a float32 constant packed into the weights, or an activation.
StepOperand operand(const frontend::Graph& g, const frontend::Node& n, const std::string& tensor,
                    const Constants& constants);

// The integer values of input `index` (int64 or int32 constant): nullopt when the node omits it
// ("" or past its inputs); throws unsupported when it is no integer constant.
std::optional<std::vector<int64_t>> int_input(const frontend::Node& n, size_t index,
                                              const Constants& constants);

// `axis` in [0, rank) (a negative one counts from the end); throws unsupported past the rank.
int64_t normalized_axis(const frontend::Node& n, int64_t axis, size_t rank);

// A step that copies `input` (an activation) to `output` of the same element count.
GeneratedStep copy_step(const frontend::Graph& g, const frontend::Node& n, const std::string& input,
                        const std::string& output);

// The steps of a Concat, Split, Slice, Pad, Gather, Resize or Upsample node (model_nodes_data.cc);
// empty for any other node.
std::vector<GeneratedStep> describe_data(const frontend::Graph& g, const frontend::Node& n,
                                         const Constants& constants);

}  // namespace ktune::deploy::nodes
