// Lowering pass: multi-dimensional Realize/BufferLoad/BufferStore -> flat Allocate/Load/Store.
#include <unordered_map>

#include "support/error.h"
#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

struct Layout {
  std::vector<Expr> mins;
  std::vector<int64_t> extents;
};

class Flattener : public IRMutator {
 public:
  explicit Flattener(const std::vector<BufferArg>& args) {
    for (const BufferArg& a : args) {
      layouts_[a.buffer.get()] =
          Layout{std::vector<Expr>(a.shape.size(), IntImm::make(0)), a.shape};
    }
  }
  using IRMutator::mutate;

 protected:
  Expr visit(const BufferLoad* op, const Expr& e) override {
    Expr base = IRMutator::visit(op, e);
    const BufferLoad* l = base.as<BufferLoad>();
    return Load::make(l->buffer, flat(l->buffer, l->indices));
  }
  Stmt visit(const BufferStore* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);
    const BufferStore* st = base.as<BufferStore>();
    return Store::make(st->buffer, st->value, flat(st->buffer, st->indices));
  }
  Stmt visit(const Realize* op, const Stmt&) override {
    layouts_[op->buffer.get()] = Layout{op->mins, op->extents};
    Stmt body = mutate(op->body);
    layouts_.erase(op->buffer.get());
    int64_t n = 1;
    for (int64_t e : op->extents) n *= e;
    return Allocate::make(op->buffer, IntImm::make(n), body);
  }

 private:
  Expr flat(const Buffer& b, const std::vector<Expr>& idx) {
    auto it = layouts_.find(b.get());
    if (it == layouts_.end())
      throw Error(ErrorKind::kInternal,
                  "storage_flatten: buffer " + b.name() + " has no storage here");
    const Layout& l = it->second;
    Expr out = IntImm::make(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      out = Add::make(Mul::make(out, IntImm::make(l.extents[d])), Sub::make(idx[d], l.mins[d]));
    }
    return simplify(out);
  }

  std::unordered_map<const BufferNode*, Layout> layouts_;
};

}  // namespace

Stmt storage_flatten(const Stmt& s, const std::vector<BufferArg>& args) {
  Flattener f(args);
  return f.mutate(s);
}

}  // namespace ktune::te
