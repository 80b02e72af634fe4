// Declares what model_nodes.cc and the family files model_nodes_<family>.cc share: reading a
// node's shapes, operands and integer parameters (attributes before an opset, constant inputs
// after), and each family's steps. Private to those files.
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

// Each operator family's steps for node `n` of that family (describe_node's registry), in its
// own file; empty for a form the family leaves to the planner (two activations of one shape are
// the same-shape elementwise kernel's; DepthToSpace the planner's).
std::vector<GeneratedStep> binary_steps(const frontend::Graph& g, const frontend::Node& n,
                                        const Constants& constants);  // model_nodes_binary.cc
std::vector<GeneratedStep> normalize_steps(const frontend::Graph& g, const frontend::Node& n,
                                           const Constants& constants);  // ..._normalize.cc
std::vector<GeneratedStep> reduce_steps(const frontend::Graph& g, const frontend::Node& n,
                                        const Constants& constants);  // model_nodes_reduce.cc
std::vector<GeneratedStep> quantize_steps(const frontend::Graph& g, const frontend::Node& n,
                                          const Constants& constants);  // ..._quantize.cc
std::vector<GeneratedStep> data_steps(const frontend::Graph& g, const frontend::Node& n,
                                      const Constants& constants);  // model_nodes_data.cc

}  // namespace ktune::deploy::nodes
