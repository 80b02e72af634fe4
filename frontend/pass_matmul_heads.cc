// read_heads_in_place(): attention's q, k and v come out of one projection, [1, S, 3 x H x D],
// and exporters split it into heads by Reshape to [1, S, 3, H, D], Transpose to
// [3, 1, H, S, D] and a Gather (torch, timm) or Slice + Squeeze (paddle) of each of the three;
// or of three projections, each Reshape to [1, S, H, D] and Transpose to [1, H, S, D] (k to
// [1, H, D, S]: BERT as torch exports it). A model build ran each Transpose as a generated
// kernel: a copy of the projection on every layer, across threads. The products read the heads
// where the projection wrote them just as well: matrix h of q is rows [s, slot h, 0..D) of the [S,
// 3H, D] buffer (batch_matmul's a_heads, b_heads). After attention, exporters put the heads back
// side by side, Transpose [1, H, S, D] to [1, S, H, D], before the projection; the product writes
// them there as well (c_heads). This pass rewrites each product whose operands are such selections,
// or whose output only that Transpose reads, into HeadsMatMul (domain "ktune", heads_matmul.h); the
// selections and the Transposes go when nothing else reads them.
#include <map>
#include <optional>

#include "frontend/graph_passes.h"
#include "frontend/heads_matmul.h"
#include "frontend/op_params.h"
#include "support/error.h"

namespace ktune::frontend {
namespace {

// The heads of a projection a product reads: slots [first, first + H) of each row of `source`
// (stored [S, heads, D]); `transposed`: read as [1, H, D, S] (k^T).
struct HeadGroup {
  std::string source;  // the [1, S, G, H, D] or [1, S, H, D] tensor
  int64_t heads = 0;   // the head slots of a row: G x H, or H
  int64_t first = 0;   // the group's first slot, g x H
  bool transposed = false;
};

class HeadsRewriter {
 public:
  explicit HeadsRewriter(Graph& g) : g_(g), lookup_(lookup_in(g)), readers_(reader_counts(g)) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& out : g.nodes[i].outputs) producer_[out] = i;
      for (const std::string& in : g.nodes[i].inputs) reader_[in] = i;
    }
  }

  // The heads `tensor` is, or nullopt: Transpose(X, perm [0, 2, 1, 3]) of a float32 [1, S, H, D]
  // Reshape output X (a projection of its own: BERT's q and v), or perm [0, 2, 3, 1] (its k,
  // transposed); or group g of X [1, S, G, H, D]: Gather(T, g) of axis 0, or Squeeze(axis 0) of
  // Slice(T, [g, g + 1)) of axis 0, where T = Transpose(X, perm [2, 0, 3, 1, 4]).
  std::optional<HeadGroup> group_of(const std::string& tensor) const {
    const Node* sel = node_of(tensor);
    if (!sel) return std::nullopt;
    if (sel->op == "Transpose" && sel->domain.empty()) {
      // X from a Reshape (of a projection): never a product's output, which that product may
      // write transposed itself (heads_back).
      const Node* reshape = node_of(sel->inputs.at(0));
      const auto x = activation_shape(sel->inputs[0]);
      if (!reshape || reshape->op != "Reshape" || !x || x->size() != 4) return std::nullopt;
      const std::vector<int64_t> perm = perm_of(*sel, 4);
      if (perm != std::vector<int64_t>{0, 2, 1, 3} && perm != std::vector<int64_t>{0, 2, 3, 1})
        return std::nullopt;
      return HeadGroup{sel->inputs[0], (*x)[2], 0, perm[2] == 3};
    }
    if (sel->op == "Squeeze" && sel->domain.empty()) {
      const auto in = g_.shape(sel->inputs.at(0));
      std::vector<int64_t> axes;
      try {
        axes = read_axes(*sel, lookup_);
      } catch (const Error&) {
        return std::nullopt;
      }
      if (!in || in->size() != 5 || axes.size() != 1 || (axes[0] != 0 && axes[0] != -5))
        return std::nullopt;
      sel = node_of(sel->inputs[0]);
      if (!sel || sel->op != "Slice") return std::nullopt;
    } else if (sel->op != "Gather" ||
               g_.shape(tensor).value_or(std::vector<int64_t>{}).size() != 4) {
      return std::nullopt;
    }
    const auto range = single_axis_range(g_, *sel, lookup_);
    if (!range || range->axis != 0 || range->length != 1) return std::nullopt;
    const Node* t = node_of(sel->inputs[0]);
    if (!t || t->op != "Transpose" || !t->domain.empty()) return std::nullopt;
    const auto x = activation_shape(t->inputs.at(0));
    if (!x || x->size() != 5 || perm_of(*t, 5) != std::vector<int64_t>{2, 0, 3, 1, 4})
      return std::nullopt;
    const int64_t G = (*x)[2], H = (*x)[3];
    return HeadGroup{t->inputs[0], G * H, range->start * H};
  }

  // The Transpose of [1, H, S, D] to [1, S, H, D] that alone reads product output `tensor`
  // (the heads back side by side before the projection), or nullopt.
  std::optional<size_t> heads_back(const std::string& tensor) const {
    const auto r = reader_.find(tensor);
    if (r == reader_.end() || readers_.at(tensor) != 1) return std::nullopt;
    const Node& t = g_.nodes[r->second];
    const auto shape = g_.shape(tensor);
    if (t.op != "Transpose" || !t.domain.empty() || !shape || shape->size() != 4 ||
        (*shape)[0] != 1 || perm_of(t, 4) != std::vector<int64_t>{0, 2, 1, 3})
      return std::nullopt;
    return r->second;
  }

  // Rewrites product `m` when one of its operands is a group of heads (the other one too, or a
  // [1, H, rows, cols] tensor) or a Transpose puts its output's heads side by side; returns
  // whether it did, and that Transpose, which then goes, in `gone`.
  bool rewrite(Node& m, std::optional<size_t>& gone) const {
    const bool fused = m.op == "FusedMatMul" && m.domain == "com.microsoft";
    if (!((m.op == "MatMul" && m.domain.empty()) || fused) || m.inputs.size() != 2) return false;
    if (fused && (m.int_or("transB", 0) != 1 || m.int_or("transA", 0) != 0 ||
                  m.int_or("transBatchA", 0) != 0 || m.int_or("transBatchB", 0) != 0 ||
                  m.float_or("alpha", 1.0) != 1.0))
      return false;
    std::optional<HeadGroup> a = group_of(m.inputs[0]), b = group_of(m.inputs[1]);
    // A is read as it is; B transposed (k^T) makes the product's B [N, K], which FusedMatMul's
    // is already.
    if (a && a->transposed) a.reset();
    if (b && b->transposed && fused) b.reset();
    const std::optional<size_t> back = heads_back(m.outputs.at(0));
    if (!a && !b && !back) return false;
    const auto sa = g_.shape(m.inputs[0]);
    auto sb = g_.shape(m.inputs[1]);
    if (!sa || !sb || sa->size() != 4 || sb->size() != 4 || (*sa)[0] != 1 || (*sb)[0] != 1 ||
        (*sa)[1] != (*sb)[1] || g_.type(m.inputs[0]) != "float32" ||
        g_.type(m.inputs[1]) != "float32")
      return false;
    const bool nt = fused || (b && b->transposed);
    if (b && b->transposed) std::swap((*sb)[2], (*sb)[3]);  // B as the product reads it: [.., N, K]
    gone = back;
    m.op = kHeadsMatMul;
    m.domain = kHeadsMatMulDomain;
    m.attrs.clear();
    m.attrs["transB"] = ints_attr({nt ? 1 : 0});
    const std::pair<const char*, const std::optional<HeadGroup>*> operands[] = {{"a", &a},
                                                                                {"b", &b}};
    for (size_t k = 0; k < 2; ++k) {
      const std::optional<HeadGroup>& h = *operands[k].second;
      if (!h) continue;
      m.inputs[k] = h->source;
      m.attrs[std::string(operands[k].first) + "_heads"] = ints_attr({h->heads});
      m.attrs[std::string(operands[k].first) + "_head"] = ints_attr({h->first});
      m.attrs[std::string(operands[k].first) + "_shape"] = ints_attr(k == 0 ? *sa : *sb);
    }
    if (gone) {
      m.outputs[0] = g_.nodes[*gone].outputs.at(0);
      m.attrs["c_heads"] = ints_attr({(*sa)[1]});
    }
    m.onnx.clear();  // no longer the node the file holds
    return true;
  }

 private:
  // The shape of float32 activation `tensor` of batch 1 (no constant), or nullopt.
  std::optional<std::vector<int64_t>> activation_shape(const std::string& tensor) const {
    const auto shape = g_.shape(tensor);
    if (!shape || shape->empty() || (*shape)[0] != 1 || g_.type(tensor) != "float32" ||
        g_.constants.count(tensor))
      return std::nullopt;
    return shape;
  }

  // Transpose `t`'s perm for a rank-`rank` input, or none when it has no valid one.
  static std::vector<int64_t> perm_of(const Node& t, size_t rank) {
    try {
      return read_perm(t, rank);
    } catch (const Error&) {
      return {};
    }
  }

  const Node* node_of(const std::string& tensor) const {
    const auto p = producer_.find(tensor);
    return p == producer_.end() ? nullptr : &g_.nodes[p->second];
  }

  Graph& g_;
  ConstantLookup lookup_;
  std::map<std::string, int> readers_;
  std::map<std::string, size_t> producer_, reader_;  // a tensor's producer; one of its readers
};

}  // namespace

void read_heads_in_place(Model& model) {
  Graph& g = model.graph;
  bool any = false;
  std::vector<bool> gone(g.nodes.size(), false);
  {
    const HeadsRewriter rewriter(g);
    for (Node& n : g.nodes) {
      std::optional<size_t> transpose;
      any = rewriter.rewrite(n, transpose) || any;
      if (transpose) gone[*transpose] = true;
    }
  }
  if (!any) return;
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!gone[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  remove_dead_nodes(model);
}

HeadsOperand heads_operand(const Graph& g, const Node& n, size_t input) {
  const std::string x = input == 0 ? "a" : "b";
  HeadsOperand o;
  o.heads = n.int_or(x + "_heads", 0);
  o.head = n.int_or(x + "_head", 0);
  o.shape = o.heads > 0 ? n.ints(x + "_shape")
                        : g.shape(n.inputs.at(input)).value_or(std::vector<int64_t>{});
  return o;
}

}  // namespace ktune::frontend
