// The generated kernels of a model build that move data between shapes: Concat, Slice (and Split's
// parts), Gather of constant indices, Pad and Resize. Each element of the output is read from one
// place of an input (Resize's linear mode: four), so every kernel is one compute under the plain
// schedule: the leading axes fused and parallel from kParallelMin elements, the innermost
// vectorized where the reads along it are contiguous. Reads that a Select discards are kept in
// bounds by te's lowering (lower_clamp_select_loads).
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "deploy/generated_schedule.h"
#include "deploy/model_ops.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::deploy {
namespace {

te::Expr i64(int64_t v) { return te::Expr(v); }

// The plain schedule (model_ops_nn.cc's): leading axes fused and parallel, the last vectorized
// when `vector_last`.
te::LoweredFunc lower_plain(const std::string& name, const std::vector<te::Tensor>& inputs,
                            const te::Tensor& out, bool vector_last) {
  te::Schedule s = te::create_schedule({out});
  te::Stage st = s[out];
  const int rank = out.ndim();
  if (rank >= 2 && out.num_elements() >= kParallelMin) {
    te::IterVar outer = st.axis(0);
    for (int d = 1; d + 1 < rank; ++d) outer = st.fuse(outer, st.axis(d));
    st.parallel(outer);
  }
  if (vector_last && out.shape().back() >= kLanes) {
    auto [o, lanes] = st.split(st.axis(rank - 1), kLanes);
    (void)o;
    st.vectorize(lanes);
  }
  std::vector<te::Tensor> args = inputs;
  args.push_back(out);
  return te::lower(s, args, name);
}

void check_rank(const std::vector<int64_t>& shape, const char* what) {
  if (shape.empty() || shape.size() > kMaxRank)
    throw Error(ErrorKind::kUnsupported, std::string(what) + ": rank 0 or above 6");
}

std::vector<te::Expr> exprs(const std::vector<te::Var>& i) { return {i.begin(), i.end()}; }

}  // namespace

te::LoweredFunc concat(const std::string& name, const std::vector<std::vector<int64_t>>& inputs,
                       int64_t axis) {
  if (inputs.empty()) throw Error(ErrorKind::kInvalidArgument, "concat: no operands");
  const std::vector<int64_t>& first = inputs.front();
  check_rank(first, "concat");
  const size_t a = static_cast<size_t>(axis);
  if (axis < 0 || a >= first.size())
    throw Error(ErrorKind::kInvalidArgument, "concat: axis out of range");
  std::vector<int64_t> out = first;
  std::vector<int64_t> offsets = {0};
  out[a] = 0;
  for (const auto& s : inputs) {
    std::vector<int64_t> other = s, mine = first;
    other[a] = mine[a] = 0;
    if (s.size() != first.size() || other != mine)
      throw Error(ErrorKind::kInvalidArgument, "concat: operands differ off the axis");
    out[a] += s[a];
    offsets.push_back(out[a]);
  }
  std::vector<te::Tensor> args;
  for (size_t k = 0; k < inputs.size(); ++k)
    args.push_back(te::placeholder(inputs[k], te::Float(32), "in" + std::to_string(k)));
  te::Tensor o = te::compute(
      out,
      [&](const std::vector<te::Var>& i) {
        // The last operand unless the index lies before its offset, and so on down.
        std::vector<te::Expr> at = exprs(i);
        at[a] = i[a] - i64(offsets[inputs.size() - 1]);
        te::Expr v = args.back().read(at);
        for (size_t k = inputs.size() - 1; k-- > 0;) {
          at[a] = i[a] - i64(offsets[k]);
          v = te::select(te::Expr(i[a]) < i64(offsets[k + 1]), args[k].read(at), v);
        }
        return v;
      },
      "out");
  // Along the last axis the lanes may straddle two operands (gathers): only another axis keeps
  // the vectors dense.
  return lower_plain(name, args, o, a + 1 != out.size());
}

te::LoweredFunc strided_slice(const std::string& name, const std::vector<int64_t>& in,
                              const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                              const std::vector<int64_t>& out) {
  check_rank(in, "slice");
  if (start.size() != in.size() || step.size() != in.size() || out.size() != in.size())
    throw Error(ErrorKind::kInvalidArgument, "slice: starts, steps or output of another rank");
  for (size_t d = 0; d < in.size(); ++d) {
    const int64_t last = start[d] + (out[d] - 1) * step[d];
    if (out[d] < 1 || start[d] < 0 || start[d] >= in[d] || last < 0 || last >= in[d])
      throw Error(ErrorKind::kInvalidArgument, "slice: a read outside the input");
  }
  te::Tensor x = te::placeholder(in, te::Float(32), "in");
  te::Tensor o = te::compute(
      out,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> at;
        for (size_t d = 0; d < in.size(); ++d)
          at.push_back(step[d] == 1 ? i64(start[d]) + i[d] : i64(start[d]) + i[d] * i64(step[d]));
        return x.read(at);
      },
      "out");
  return lower_plain(name, {x}, o, step.back() == 1);
}

te::LoweredFunc gather(const std::string& name, const std::vector<int64_t>& in, int64_t axis,
                       const std::vector<int64_t>& indices) {
  check_rank(in, "gather");
  const size_t a = static_cast<size_t>(axis);
  if (axis < 0 || a >= in.size() || indices.empty())
    throw Error(ErrorKind::kInvalidArgument, "gather: axis out of range or no index");
  for (int64_t v : indices)
    if (v < 0 || v >= in[a]) throw Error(ErrorKind::kInvalidArgument, "gather: index out of range");
  const int64_t k = static_cast<int64_t>(indices.size());
  // Indices in arithmetic progression (one index, a range, every other) are a slice.
  const int64_t stride = k > 1 ? indices[1] - indices[0] : 1;
  bool progression = true;
  for (int64_t j = 1; j < k; ++j)
    progression = progression &&
                  indices[static_cast<size_t>(j)] - indices[static_cast<size_t>(j - 1)] == stride;
  std::vector<int64_t> out = in;
  out[a] = k;
  if (progression && stride > 0) {
    std::vector<int64_t> start(in.size(), 0), step(in.size(), 1);
    start[a] = indices[0];
    step[a] = stride;
    return strided_slice(name, in, start, step, out);
  }
  if (k > 64) throw Error(ErrorKind::kUnsupported, "gather: more than 64 irregular indices");
  te::Tensor x = te::placeholder(in, te::Float(32), "in");
  te::Tensor o = te::compute(
      out,
      [&](const std::vector<te::Var>& i) {
        // The index as a chain of immediates: a handful of constants, no table argument.
        te::Expr index = i64(indices.back());
        for (int64_t j = k - 1; j-- > 0;)
          index = te::select(te::Expr(i[a]) == i64(j), i64(indices[static_cast<size_t>(j)]), index);
        std::vector<te::Expr> at = exprs(i);
        at[a] = index;
        return x.read(at);
      },
      "out");
  return lower_plain(name, {x}, o, a + 1 != in.size());
}

te::LoweredFunc pad(const std::string& name, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
                    const std::string& mode, float value) {
  check_rank(in, "pad");
  if (begin.size() != in.size() || end.size() != in.size())
    throw Error(ErrorKind::kInvalidArgument, "pad: pads of another rank");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    throw Error(ErrorKind::kUnsupported, "pad: mode '" + mode + "' is not built");
  std::vector<int64_t> out(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    out[d] = in[d] + begin[d] + end[d];
    if (out[d] < 1) throw Error(ErrorKind::kInvalidArgument, "pad: an empty output");
    // Reflection mirrors once: a pad past the edge's neighbours would read outside.
    if (mode == "reflect" && (begin[d] >= in[d] || end[d] >= in[d]))
      throw Error(ErrorKind::kUnsupported, "pad: a reflection wider than the input");
  }
  te::Tensor x = te::placeholder(in, te::Float(32), "in");
  te::Tensor o = te::compute(
      out,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> at;
        te::Expr inside;
        for (size_t d = 0; d < in.size(); ++d) {
          const te::Expr j = te::Expr(i[d]) - i64(begin[d]), last = i64(in[d] - 1);
          if (mode == "constant") {
            const te::Expr here = j >= i64(0) && j <= last;
            inside = inside.defined() ? (inside && here) : here;
            at.push_back(j);
          } else if (mode == "edge") {
            at.push_back(te::min(te::max(j, i64(0)), last));
          } else {
            // reflect: -j before the start, 2 last - j past the end.
            at.push_back(te::select(j < i64(0), -j, te::select(j > last, i64(2) * last - j, j)));
          }
        }
        return mode == "constant" ? te::select(inside, x.read(at), f(value)) : x.read(at);
      },
      "out");
  return lower_plain(name, {x}, o, mode == "constant");
}

std::vector<float> resize_table(const frontend::ResizeAxis& axis) {
  std::vector<float> t;
  for (int64_t v : axis.index0) t.push_back(static_cast<float>(v));
  for (int64_t v : axis.index1) t.push_back(static_cast<float>(v));
  t.insert(t.end(), axis.weight0.begin(), axis.weight0.end());
  t.insert(t.end(), axis.weight1.begin(), axis.weight1.end());
  return t;
}

te::LoweredFunc gather_rows(const std::string& name, const std::vector<int64_t>& table,
                            int64_t axis, const std::vector<int64_t>& indices,
                            te::DataType index_type) {
  check_rank(table, "gather");
  const size_t a = static_cast<size_t>(axis);
  if (axis < 0 || a >= table.size() || table[a] < 1)
    throw Error(ErrorKind::kInvalidArgument, "gather: axis out of range or an empty table");
  if (index_type != te::Int(64) && index_type != te::Int(32))
    throw Error(ErrorKind::kInvalidArgument, "gather: indices must be int64 or int32");
  const std::vector<int64_t> ids = indices.empty() ? std::vector<int64_t>{1} : indices;
  std::vector<int64_t> out(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(a));
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), table.begin() + static_cast<std::ptrdiff_t>(a) + 1, table.end());
  const int64_t rows = table[a];
  te::Tensor x = te::placeholder(table, te::Float(32), "table");
  te::Tensor id = te::placeholder(ids, index_type, "indices");
  te::Tensor o = te::compute(
      out,
      [&](const std::vector<te::Var>& i) {
        std::vector<te::Expr> at_id;
        for (size_t d = 0; d < ids.size(); ++d) at_id.push_back(te::Expr(i[a + d]));
        te::Expr row = te::cast(te::kIndexType, id.read(at_id));
        row = te::select(row < i64(0), row + i64(rows), row);
        row = te::max(i64(0), te::min(i64(rows - 1), row));
        std::vector<te::Expr> at;
        for (size_t d = 0; d < a; ++d) at.push_back(te::Expr(i[d]));
        at.push_back(row);
        for (size_t d = a + 1; d < table.size(); ++d) at.push_back(te::Expr(i[d - 1 + ids.size()]));
        return x.read(at);
      },
      "out");
  // Rows are contiguous along the table's later axes; along the last axis every read is a
  // gather.
  return lower_plain(name, {x, id}, o, a + 1 != table.size());
}

te::LoweredFunc resize(const std::string& name, const std::vector<int64_t>& in, int64_t oh,
                       int64_t ow, bool linear) {
  if (in.size() != 4) throw Error(ErrorKind::kUnsupported, "resize: not 4-D");
  te::Tensor x = te::placeholder(in, te::Float(32), "x");
  te::Tensor ht = te::placeholder({4, oh}, te::Float(32), "h_table");
  te::Tensor wt = te::placeholder({4, ow}, te::Float(32), "w_table");
  // The tables hold indices below 2^24 as float32: exact.
  const auto index = [](const te::Tensor& t, int row, const te::Var& v) {
    return te::cast(te::kIndexType, t(row, v));
  };
  te::Tensor o = te::compute(
      {in[0], in[1], oh, ow},
      [&](te::Var n, te::Var c, te::Var y, te::Var xo) {
        const te::Expr y0 = index(ht, 0, y), x0 = index(wt, 0, xo);
        if (!linear) return x(n, c, y0, x0);
        const te::Expr y1 = index(ht, 1, y), x1 = index(wt, 1, xo);
        const te::Expr wy0 = ht(2, y), wy1 = ht(3, y), wx0 = wt(2, xo), wx1 = wt(3, xo);
        return wx0 * wy0 * x(n, c, y0, x0) + wx1 * wy0 * x(n, c, y0, x1) +
               wx0 * wy1 * x(n, c, y1, x0) + wx1 * wy1 * x(n, c, y1, x1);
      },
      "out");
  // The reads through the tables are gathers: vector lanes would not be dense.
  return lower_plain(name, {x, ht, wt}, o, false);
}

}  // namespace ktune::deploy
