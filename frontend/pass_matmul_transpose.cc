// fold_transpose_into_matmul(): attention's scores are q times k transposed, and exporters write
// the transposition as a node of its own (torch's k.transpose(-2, -1), paddle's transpose_y):
// Transpose(k, perm [.., n-1, n-2]) -> MatMul(q, .). A model build ran it as a generated kernel
// that copies k, on every head, before the product. The product reads B as [.., N, K] just as
// well (batch_matmul and matmul layout=nt), so this pass rewrites the pair into one node, ONNX
// Runtime's com.microsoft FusedMatMul with transB=1 (what its MatmulTransposeFusion writes), and
// the Transpose goes.
#include <algorithm>
#include <map>

#include "frontend/graph_passes.h"
#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

// Whether Transpose `t` swaps the last two axes of its input and keeps the others in place.
bool swaps_last_two(const Graph& g, const Node& t) {
  if (t.op != "Transpose" || !t.domain.empty() || t.inputs.size() != 1 || t.outputs.size() != 1)
    return false;
  const auto shape = g.shape(t.inputs[0]);
  if (!shape || shape->size() < 2) return false;
  const size_t rank = shape->size();
  std::vector<int64_t> perm;
  try {
    perm = read_perm(t, rank);
  } catch (const Error&) {
    return false;
  }
  for (size_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return perm[rank - 2] == static_cast<int64_t>(rank - 1) &&
         perm[rank - 1] == static_cast<int64_t>(rank - 2);
}

// Whether MatMul `m` of B = [.., N, K] read as [.., K, N] maps onto one product: B a matrix
// (matmul layout=nt), or A and B of one rank with the same batch axes (batch_matmul layout=nt).
// Broadcast batches stay a Transpose and a MatMul.
bool maps_transposed(const Graph& g, const Node& m, const std::string& b_untransposed) {
  const auto a = g.shape(m.inputs[0]);
  const auto b = g.shape(b_untransposed);
  if (!a || !b || a->size() < 2 || b->size() < 2) return false;
  if (g.type(m.inputs[0]) != "float32" || g.type(b_untransposed) != "float32") return false;
  if (b->size() == 2) return true;
  return a->size() == b->size() && std::equal(a->begin(), a->end() - 2, b->begin());
}

}  // namespace

void fold_transpose_into_matmul(Model& model) {
  Graph& g = model.graph;
  std::map<std::string, int> readers = reader_counts(g);
  std::map<std::string, size_t> transpose_of;  // a swapping Transpose's output -> its node
  std::vector<bool> folded(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (swaps_last_two(g, n) && !g.constants.count(n.inputs[0])) transpose_of[n.outputs[0]] = i;
    if (n.op != "MatMul" || !n.domain.empty() || n.inputs.size() != 2) continue;
    auto t = transpose_of.find(n.inputs[1]);
    if (t == transpose_of.end() || readers[n.inputs[1]] != 1) continue;
    const std::string& b = g.nodes[t->second].inputs[0];
    if (!maps_transposed(g, n, b)) continue;
    n.op = "FusedMatMul";
    n.domain = "com.microsoft";
    n.inputs[1] = b;
    n.attrs["transB"] = Attribute{{1}, {}, {}, {}};
    n.onnx.clear();  // no longer the node the file holds
    folded[t->second] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!folded[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace ktune::frontend
