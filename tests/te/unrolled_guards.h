// Defines ifs_in_unrolled_loops(): the guards a lowering left inside register tiles.
#pragma once

#include "te/ir.h"
#include "te/ir_visitor.h"

namespace ktune::te::testing {

// The Ifs inside unrolled loops: after cut_border_tiles, the branches left in the unrolled
// copies of a register tile.
inline int ifs_in_unrolled_loops(const Stmt& s) {
  class Count : public IRVisitor {
   public:
    int ifs = 0;

   protected:
    void visit(const For* op) override {
      const bool tile = op->for_kind == ForKind::kUnrolled;
      depth_ += tile;
      IRVisitor::visit(op);
      depth_ -= tile;
    }
    void visit(const IfThenElse* op) override {
      ifs += depth_ > 0;
      IRVisitor::visit(op);
    }

   private:
    int depth_ = 0;
  };
  Count c;
  c.visit_stmt(s);
  return c.ifs;
}

}  // namespace ktune::te::testing
