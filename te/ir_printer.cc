// Implements the C-like IR printer.
#include "te/ir_printer.h"

#include <cmath>
#include <sstream>

#include "te/tensor.h"

namespace ktune::te {

namespace {

class Printer {
 public:
  std::ostringstream os;

  void expr(const Expr& e) {
    if (!e.defined()) {
      os << "<undef>";
      return;
    }
    switch (e.kind()) {
      case NodeKind::kIntImm: {
        const IntImm* op = e.as<IntImm>();
        if (op->dtype.is_bool()) {
          os << (op->value ? "true" : "false");
        } else {
          os << op->value;
          if (op->dtype != kIndexType) os << "(" << op->dtype.str() << ")";
        }
        return;
      }
      case NodeKind::kFloatImm: {
        const FloatImm* op = e.as<FloatImm>();
        if (std::isinf(op->value) || std::isnan(op->value)) {
          os << (std::isnan(op->value) ? "nan" : op->value < 0 ? "-inf" : "inf");
          return;
        }
        std::ostringstream s;
        s.precision(op->dtype.bits == 32 ? 9 : 17);
        s << op->value;
        std::string t = s.str();
        if (std::isfinite(op->value) && t.find_first_of(".e") == std::string::npos) t += ".0";
        os << t << (op->dtype.bits == 32 ? "f" : "");
        return;
      }
      case NodeKind::kVar:
        os << e.as<VarNode>()->name;
        return;
      case NodeKind::kAdd:
        bin(e.as<Add>(), " + ");
        return;
      case NodeKind::kSub:
        bin(e.as<Sub>(), " - ");
        return;
      case NodeKind::kMul:
        bin(e.as<Mul>(), "*");
        return;
      case NodeKind::kDiv:
        bin(e.as<Div>(), " / ");
        return;
      case NodeKind::kMod:
        bin(e.as<Mod>(), " % ");
        return;
      case NodeKind::kMin:
        call2("min", e.as<Min>());
        return;
      case NodeKind::kMax:
        call2("max", e.as<Max>());
        return;
      case NodeKind::kEQ:
        bin(e.as<EQ>(), " == ");
        return;
      case NodeKind::kNE:
        bin(e.as<NE>(), " != ");
        return;
      case NodeKind::kLT:
        bin(e.as<LT>(), " < ");
        return;
      case NodeKind::kLE:
        bin(e.as<LE>(), " <= ");
        return;
      case NodeKind::kGT:
        bin(e.as<GT>(), " > ");
        return;
      case NodeKind::kGE:
        bin(e.as<GE>(), " >= ");
        return;
      case NodeKind::kAnd:
        bin(e.as<And>(), " && ");
        return;
      case NodeKind::kOr:
        bin(e.as<Or>(), " || ");
        return;
      case NodeKind::kNot:
        os << "!";
        expr(e.as<Not>()->a);
        return;
      case NodeKind::kSelect: {
        const Select* op = e.as<Select>();
        os << "select(";
        expr(op->condition);
        os << ", ";
        expr(op->true_value);
        os << ", ";
        expr(op->false_value);
        os << ")";
        return;
      }
      case NodeKind::kCast: {
        const Cast* op = e.as<Cast>();
        os << op->dtype.str() << "(";
        expr(op->value);
        os << ")";
        return;
      }
      case NodeKind::kCall: {
        const Call* op = e.as<Call>();
        os << call_op_name(op->op) << "(";
        list(op->args);
        os << ")";
        return;
      }
      case NodeKind::kRamp: {
        const Ramp* op = e.as<Ramp>();
        os << "ramp(";
        expr(op->base);
        os << ", ";
        expr(op->stride);
        os << ", " << op->lanes << ")";
        return;
      }
      case NodeKind::kBroadcast: {
        const Broadcast* op = e.as<Broadcast>();
        os << "x" << op->lanes << "(";
        expr(op->value);
        os << ")";
        return;
      }
      case NodeKind::kLet: {
        const Let* op = e.as<Let>();
        os << "(let " << op->var.name() << " = ";
        expr(op->value);
        os << " in ";
        expr(op->body);
        os << ")";
        return;
      }
      case NodeKind::kLoad: {
        const Load* op = e.as<Load>();
        os << op->buffer.name() << "[";
        expr(op->index);
        os << "]";
        return;
      }
      case NodeKind::kTensorRead: {
        const TensorRead* op = e.as<TensorRead>();
        os << op->tensor->name << "(";
        list(op->indices);
        os << ")";
        return;
      }
      case NodeKind::kReduce: {
        const Reduce* op = e.as<Reduce>();
        os << reduce_op_name(op->op) << "(";
        expr(op->source);
        os << ", axis={";
        for (size_t i = 0; i < op->axes.size(); ++i) {
          os << (i ? ", " : "") << op->axes[i].var.name() << " in [" << op->axes[i].min << ", "
             << op->axes[i].min + op->axes[i].extent << ")";
        }
        os << "})";
        return;
      }
      case NodeKind::kBufferLoad: {
        const BufferLoad* op = e.as<BufferLoad>();
        os << op->buffer.name() << "(";
        list(op->indices);
        os << ")";
        return;
      }
      default:
        os << "<stmt?>";
        return;
    }
  }

  void stmt(const Stmt& s, int indent) {
    if (!s.defined()) return;
    std::string pad(indent * 2, ' ');
    switch (s.kind()) {
      case NodeKind::kFor: {
        const For* op = s.as<For>();
        os << pad;
        if (op->for_kind != ForKind::kSerial) os << for_kind_name(op->for_kind) << " ";
        os << "for (" << op->var.name() << ", ";
        expr(op->min);
        os << ", ";
        expr(op->extent);
        os << ") {\n";
        stmt(op->body, indent + 1);
        os << pad << "}\n";
        return;
      }
      case NodeKind::kStore: {
        const Store* op = s.as<Store>();
        os << pad << op->buffer.name() << "[";
        expr(op->index);
        os << "] = ";
        expr(op->value);
        os << ";\n";
        return;
      }
      case NodeKind::kAllocate: {
        const Allocate* op = s.as<Allocate>();
        os << pad << op->buffer.dtype().str() << " " << op->buffer.name() << "[";
        expr(op->extent);
        os << "];\n";
        stmt(op->body, indent);
        return;
      }
      case NodeKind::kIfThenElse: {
        const IfThenElse* op = s.as<IfThenElse>();
        os << pad << "if (";
        expr(op->condition);
        os << ") {\n";
        stmt(op->then_case, indent + 1);
        if (op->else_case.defined()) {
          os << pad << "} else {\n";
          stmt(op->else_case, indent + 1);
        }
        os << pad << "}\n";
        return;
      }
      case NodeKind::kLetStmt: {
        const LetStmt* op = s.as<LetStmt>();
        os << pad << op->value.dtype().str() << " " << op->var.name() << " = ";
        expr(op->value);
        os << ";\n";
        stmt(op->body, indent);
        return;
      }
      case NodeKind::kBlock:
        for (const Stmt& x : s.as<Block>()->stmts) stmt(x, indent);
        return;
      case NodeKind::kEvaluate:
        os << pad;
        expr(s.as<Evaluate>()->value);
        os << ";\n";
        return;
      case NodeKind::kBufferStore: {
        const BufferStore* op = s.as<BufferStore>();
        os << pad << op->buffer.name() << "(";
        list(op->indices);
        os << ") = ";
        expr(op->value);
        os << ";\n";
        return;
      }
      case NodeKind::kRealize: {
        const Realize* op = s.as<Realize>();
        os << pad << "realize " << op->buffer.name() << "(";
        for (size_t i = 0; i < op->mins.size(); ++i) {
          os << (i ? ", " : "") << "[";
          expr(op->mins[i]);
          os << ", +" << op->extents[i] << ")";
        }
        os << ") {\n";
        stmt(op->body, indent + 1);
        os << pad << "}\n";
        return;
      }
      default:
        os << pad << "<expr?>\n";
        return;
    }
  }

 private:
  template <typename T>
  void bin(const T* op, const char* sym) {
    os << "(";
    expr(op->a);
    os << sym;
    expr(op->b);
    os << ")";
  }
  template <typename T>
  void call2(const char* name, const T* op) {
    os << name << "(";
    expr(op->a);
    os << ", ";
    expr(op->b);
    os << ")";
  }
  void list(const std::vector<Expr>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os << ", ";
      expr(v[i]);
    }
  }
};

}  // namespace

std::string to_string(const Expr& e) {
  Printer p;
  p.expr(e);
  return p.os.str();
}

std::string to_string(const Stmt& s) {
  Printer p;
  p.stmt(s, 0);
  return p.os.str();
}

std::string to_string(const LoweredFunc& f) {
  Printer p;
  p.os << "void " << f.name << "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    const BufferArg& a = f.args[i];
    p.os << (i ? ", " : "") << a.dtype.str() << "* " << a.buffer.name();
    if (a.is_output) p.os << " /*out*/";
  }
  p.os << ") {\n";
  p.stmt(f.body, 1);
  p.os << "}\n";
  return p.os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << to_string(e); }
std::ostream& operator<<(std::ostream& os, const Stmt& s) { return os << to_string(s); }
std::ostream& operator<<(std::ostream& os, const LoweredFunc& f) { return os << to_string(f); }

}  // namespace ktune::te
