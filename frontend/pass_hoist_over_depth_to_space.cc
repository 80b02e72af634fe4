// hoist_over_depth_to_space(): a transposed conv's bias Add, BatchNormalization and activation (a
// decoder's ConvTranspose -> Add(bias) -> BN -> ReLU, as paddle2onnx writes it) read the
// DepthToSpace that conv_transpose_as_conv puts after its phase conv, so a model build ran them as
// kernels of their own over the upsampled tensor. They commute with a DCR DepthToSpace (per
// channel and per element): this pass moves them above it, onto the phase conv's output, their
// per-channel constants repeated for each phase (phase conv channel r*K + k is output channel k),
// where the conv's epilogue takes them.
#include <map>
#include <set>

#include "frontend/graph_passes.h"
#include "frontend/operators.h"

namespace ktune::frontend {
namespace {

const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div"};
bool is_dcr_shuffle(const Node& n) {
  return n.op == "DepthToSpace" && n.domain.empty() && n.text_or("mode", "DCR") == "DCR" &&
         n.outputs.size() == 1;
}

}  // namespace

void hoist_over_depth_to_space(Model& model) {
  Graph& g = model.graph;
  std::map<std::string, int> readers = reader_counts(g);
  std::vector<Node> nodes;
  std::map<std::string, size_t> shuffle_of;  // a DepthToSpace's output -> its index in `nodes`
  for (Node& n : g.nodes) {
    // The operand a shuffle wrote: the first, or either of a binary node's.
    size_t pos = 0;
    if (n.inputs.size() == 2 && kBinary.count(n.op) && shuffle_of.count(n.inputs[1])) pos = 1;
    const std::string in = n.inputs.size() > pos ? n.inputs[pos] : "";
    auto s = shuffle_of.find(in);
    const bool bn = n.op == "BatchNormalization" && n.inputs.size() == 5 &&
                    model.constants.count(n.inputs[1]) && model.constants.count(n.inputs[2]) &&
                    model.constants.count(n.inputs[3]) && model.constants.count(n.inputs[4]);
    const bool unary = in_family(n.op, OpFamily::kUnary);
    const bool binary =
        kBinary.count(n.op) && n.inputs.size() == 2 && model.constants.count(n.inputs[1 - pos]);
    if (s == shuffle_of.end() || !n.domain.empty() || n.outputs.size() != 1 || readers[in] != 1 ||
        !(bn || unary || binary)) {
      if (is_dcr_shuffle(n)) shuffle_of[n.outputs[0]] = nodes.size();
      nodes.push_back(std::move(n));
      continue;
    }
    // n(shuffle(P)) -> shuffle(n'(P)): n' writes P's shape, the shuffle writes n's output.
    const size_t at = s->second;
    Node& shuffle = nodes[at];
    const std::string phases = shuffle.inputs.at(0);
    const auto p_shape = g.shape(phases);
    const auto y_shape = g.shape(in);
    bool per_channel = p_shape && y_shape && p_shape->size() == 4 && y_shape->size() == 4;
    // The constant operands repeated per phase: a BN's four [K] parameters, a binary node's
    // per-channel [.., K, 1, 1] or one-element operand.
    std::vector<size_t> tiled;
    if (bn) tiled = {1, 2, 3, 4};
    if (binary) tiled = {1 - pos};
    for (size_t k : tiled) {
      if (!per_channel) break;
      const ConstantValue& v = model.constants.at(n.inputs[k]);
      const std::vector<int64_t>& shape = v.shape;
      const bool channel_vector =
          bn ? shape.size() == 1
             : shape.size() >= 3 && shape.size() <= 4 && shape[shape.size() - 1] == 1 &&
                   shape[shape.size() - 2] == 1 && (shape.size() == 3 || shape[0] == 1);
      const int64_t size = static_cast<int64_t>(v.f32.size());
      per_channel = (channel_vector && size == (*y_shape)[1]) || (!bn && size == 1);
    }
    if (!per_channel) {
      if (is_dcr_shuffle(n)) shuffle_of[n.outputs[0]] = nodes.size();
      nodes.push_back(std::move(n));
      continue;
    }
    const int64_t phases_n = (*p_shape)[1] / (*y_shape)[1];
    for (size_t k : tiled) {
      const ConstantValue& v = model.constants.at(n.inputs[k]);
      if (!bn && v.f32.size() == 1) continue;  // a scalar broadcasts to the phases as it is
      ConstantValue t{v.shape, {}, {}};
      t.shape[bn ? 0 : t.shape.size() - 3] *= phases_n;
      for (int64_t r = 0; r < phases_n; ++r) t.f32.insert(t.f32.end(), v.f32.begin(), v.f32.end());
      const std::string name = n.name + "@phases" + std::to_string(k);
      g.constants.insert(name);
      g.shapes[name] = t.shape;
      g.types[name] = g.type(n.inputs[k]);
      model.constants[name] = std::move(t);
      n.inputs[k] = name;
    }
    shuffle_of.erase(s);
    const std::string moved = n.outputs[0] + "@phases";
    g.shapes[moved] = *p_shape;
    g.types[moved] = g.type(n.outputs[0]);
    n.inputs[pos] = phases;
    const std::string out = n.outputs[0];
    n.outputs[0] = moved;
    shuffle.inputs[0] = moved;
    shuffle.outputs[0] = out;
    g.shapes.erase(in);
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at), std::move(n));
    for (auto& [tensor, index] : shuffle_of)
      if (index >= at) ++index;
    shuffle_of[out] = at + 1;
    ++readers[moved];
  }
  g.nodes = std::move(nodes);
}

}  // namespace ktune::frontend
