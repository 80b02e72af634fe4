// Lowering pass: replaces unrolled loops by copies of their bodies.
#include <spdlog/spdlog.h>

#include "te/ir_visitor.h"
#include "te/lower_passes.h"
#include "te/simplify.h"

namespace ktune::te {

namespace {

// Beyond this many copies a loop marked unrolled stays a serial loop (code size).
constexpr int64_t kMaxUnroll = 256;

class Unroller : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt base = IRMutator::visit(op, s);
    const For* f = base.as<For>();
    if (!f || f->for_kind != ForKind::kUnrolled) return base;
    const int64_t* m = as_const_int(f->min);
    const int64_t* x = as_const_int(f->extent);
    if (!m || !x || *x > kMaxUnroll) {
      spdlog::debug("te: loop {} not unrolled (extent too large or not constant)", f->var.name());
      return For::make(f->var, f->min, f->extent, ForKind::kSerial, f->body);
    }
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < *x; ++i)
      copies.push_back(substitute(f->body, {{f->var, IntImm::make(*m + i)}}));
    return Block::make(std::move(copies));
  }
};

}  // namespace

Stmt unroll_loops(const Stmt& s) {
  Unroller u;
  return u.mutate(s);
}

}  // namespace ktune::te
