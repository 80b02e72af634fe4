// The matrix product family's tasks: Gemm (transA, transB), MatMul (batched, broadcast,
// matrix-vector) and FusedMatMul (transB: B read as [.., N, K]) become matmul, batch_matmul or
// dense_bias_relu; an int8 one matmul_u8s8s32.
#include <algorithm>

#include "frontend/heads_matmul.h"
#include "frontend/op_params.h"
#include "frontend/task_extractor.h"
#include "support/error.h"

namespace ktune::frontend {

// matmul_u8s8s32 of the data's rows (every axis but the last) times the weights.
Mapped TaskExtractor::map_quantized_matmul(const QuantizedOp& q) {
  const Node& n = g_.nodes[q.node];
  const auto a = g_.shape(q.data);
  const auto b = g_.shape(q.weight);
  if (!a || !b) return NotMapped{"shape not inferred"};
  int64_t M = 1;
  for (size_t d = 0; d + 1 < a->size(); ++d) M *= (*a)[d];
  const int64_t K = a->back(), N = q.nt ? (*b)[0] : (*b)[1];
  if (K != (q.nt ? (*b)[1] : (*b)[0]))
    throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (" + n.op +
                                                 "): operand shapes " + shape_text(*a) + " and " +
                                                 shape_text(*b) + " do not multiply");
  Candidate c;
  c.template_name = "matmul_u8s8s32";
  c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}};
  c.flop = 2.0 * M * N * K;
  return c;
}

// Attention's probabilities times its values: the scores' softmax over the last axis, computed
// where the product reads it (batch_matmul a_softmax) instead of a pass that writes them.
void TaskExtractor::take_softmax_prologue(size_t i, Candidate& c) {
  const std::string& probabilities = g_.nodes[i].inputs.at(0);
  const auto producer = std::find_if(g_.nodes.begin(), g_.nodes.end(), [&](const Node& n) {
    return std::find(n.outputs.begin(), n.outputs.end(), probabilities) != n.outputs.end();
  });
  if (producer == g_.nodes.end() || producer->op != "Softmax" || !producer->domain.empty() ||
      producer->outputs.size() != 1)
    return;
  const size_t softmax = static_cast<size_t>(producer - g_.nodes.begin());
  // Node i alone reads them, once, as A.
  if (std::find(g_.outputs.begin(), g_.outputs.end(), probabilities) != g_.outputs.end()) return;
  size_t reads = 0;
  for (const Node& n : g_.nodes)
    reads += std::count(n.inputs.begin(), n.inputs.end(), probabilities);
  if (reads != 1 || fuser_.fused(softmax)) return;
  // Over the last axis (before opset 13, the axis that flattens to [rest, last]).
  const auto shape = g_.shape(probabilities);
  if (!shape || shape->empty()) return;
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t axis = read_softmax_axis(g_, *producer).axis;
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return;
  std::vector<size_t> nodes = {softmax};
  std::string scores = producer->inputs.at(0);
  double scale = 1;
  const auto scaled = scaled_softmax_at_.find(softmax);
  if (scaled != scaled_softmax_at_.end()) {
    const ScaledSoftmax& s = scaled_softmaxes_[scaled->second];
    nodes.insert(nodes.begin(), s.scale_node);
    scores = s.input;
    scale = s.scale;
  }
  if (g_.type(scores) != "float32" || g_.shape(scores) != shape) return;
  c.args["a_softmax"] = "1";
  if (scale != 1) c.args["a_scale"] = float32_text(scale);
  if (scaled != scaled_softmax_at_.end()) scaled_softmax_at_.erase(scaled);
  c.prologue = nodes;
  c.first_input = scores;
  for (size_t n : nodes) fuser_.exclude(n);
  softmax_prologues_.insert(softmax);
}

Mapped TaskExtractor::map_gemm(size_t i) {
  const Node& n = g_.nodes[i];
  // HeadsMatMul (read_heads_in_place) reads an operand in place from a packed projection: its
  // shape is the one the operand stands for.
  const bool heads = n.op == kHeadsMatMul;
  HeadsOperand ha, hb;
  if (heads) {
    ha = heads_operand(g_, n, 0);
    hb = heads_operand(g_, n, 1);
  }
  const auto a = heads ? std::optional(ha.shape) : g_.shape(n.inputs[0]);
  const auto b = heads ? std::optional(hb.shape) : g_.shape(n.inputs[1]);
  if (!a || !b || a->empty() || b->empty()) return NotMapped{"shape not inferred"};
  // FusedMatMul is what fold_transpose_into_matmul writes (and ONNX Runtime's
  // MatmulTransposeFusion): a MatMul whose B is [N, K], or [batch.., N, K] with A's batch axes.
  const bool nt_b = n.op == "FusedMatMul" || (heads && n.int_or("transB", 0) == 1);
  if (nt_b && !heads) {
    if (n.int_or("transA", 0) != 0 || n.int_or("transBatchA", 0) != 0 ||
        n.int_or("transBatchB", 0) != 0 || n.float_or("alpha", 1.0) != 1.0)
      return NotMapped{"FusedMatMul with transA, transBatchA/B or an alpha other than 1"};
    if (n.int_or("transB", 0) == 0) return NotMapped{"FusedMatMul without transB"};
    if (a->size() < 2 || b->size() < 2 ||
        (b->size() > 2 &&
         (a->size() != b->size() || !std::equal(a->begin(), a->end() - 2, b->begin()))))
      return NotMapped{"FusedMatMul of broadcast batches"};
    if (a->back() != b->back())
      throw Error(ErrorKind::kInvalidArgument,
                  "node '" + n.name + "' (FusedMatMul): operand shapes " + shape_text(*a) +
                      " and " + shape_text(*b) + " do not multiply");
  }
  Candidate c;
  bool has_bias = false;
  if (n.op == "Gemm") {
    // A transposed A is copied into [M, K] by a generated transpose before the product.
    const bool ta = n.int_or("transA", 0) != 0;
    const bool nt = n.int_or("transB", 0) != 0;
    if (a->size() != 2 || b->size() != 2)
      throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Gemm): operands " +
                                                   shape_text(*a) + " and " + shape_text(*b) +
                                                   " are not matrices");
    const int64_t M = ta ? (*a)[1] : (*a)[0], K = ta ? (*a)[0] : (*a)[1],
                  N = nt ? (*b)[0] : (*b)[1];
    if (K != (nt ? (*b)[1] : (*b)[0]))
      throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (Gemm): operand shapes " +
                                                   shape_text(*a) + " and " + shape_text(*b) +
                                                   " do not multiply");
    c.template_name = "matmul";
    c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", nt ? "nt" : "nn"}};
    c.flop = 2.0 * M * N * K;
    has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  } else if (!nt_b && (a->size() == 1 || b->size() == 1)) {
    // A matrix-vector product: [.., M, K] x [K] is the rows times a [K, 1] column (N = 1),
    // [K] x [K, N] one row (M = 1); the output holds the same elements without that axis.
    if (a->size() == 1 && b->size() > 2) return NotMapped{"a vector times a batch of matrices"};
    const bool vector_b = b->size() == 1;
    const int64_t K = a->back(), N = vector_b ? 1 : b->back();
    int64_t M = 1;
    if (vector_b)
      for (size_t d = 0; d + 1 < a->size(); ++d) M *= (*a)[d];
    if (K != (vector_b ? b->front() : (*b)[0]))
      throw Error(ErrorKind::kInvalidArgument, "node '" + n.name + "' (MatMul): operand shapes " +
                                                   shape_text(*a) + " and " + shape_text(*b) +
                                                   " do not multiply");
    c.template_name = "matmul";
    c.args = {{"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", "nn"}};
    c.flop = 2.0 * M * N * K;
    // The output's last axis is M, not a column of N: a per-column epilogue would not apply.
    if (vector_b) {
      note_not_int8(i, c);
      return c;
    }
  } else {
    const int64_t K = a->back(), M = (*a)[a->size() - 2];
    const int64_t N = nt_b ? (*b)[b->size() - 2] : b->back();
    const std::string layout = nt_b ? "nt" : "nn";
    int64_t batch = 1;
    for (size_t d = 0; d + 2 < a->size(); ++d) batch *= (*a)[d];
    if (b->size() == 2) {
      // A batch of rows times one matrix is one matrix product.
      c.template_name = "matmul";
      c.args = {{"M", i2s(batch * M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", layout}};
    } else {
      c.template_name = "batch_matmul";
      c.args = {
          {"batch", i2s(batch)}, {"M", i2s(M)}, {"N", i2s(N)}, {"K", i2s(K)}, {"layout", layout}};
      const std::pair<const char*, const HeadsOperand*> operands[] = {{"a", &ha}, {"b", &hb}};
      for (const auto& [x, h] : operands)
        if (h->heads > 0) {
          c.args[std::string(x) + "_heads"] = i2s(h->heads);
          if (h->head > 0) c.args[std::string(x) + "_head"] = i2s(h->head);
        }
      if (heads && n.int_or("c_heads", 0) > 0) c.args["c_heads"] = i2s(batch);
    }
    c.flop = 2.0 * batch * M * N * K;
  }
  if (c.template_name == "batch_matmul" && !c.args.count("a_heads")) take_softmax_prologue(i, c);
  c.epilogue = fuser_.fuse(i, has_bias, AnchorKind::kGemm, false);
  // Gemm + bias + Relu with B as [N, K] is exactly what dense_bias_relu computes.
  if (c.template_name == "matmul" && c.args["layout"] == "nt" && c.epilogue.steps == "bias_relu") {
    c.template_name = "dense_bias_relu";
    c.args.erase("layout");
    c.epilogue.steps.clear();
    c.note = "bias and relu built into the template";
  }
  note_not_int8(i, c);
  return c;
}

}  // namespace ktune::frontend
