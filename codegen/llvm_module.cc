// Translation of te's lowered loop IR into LLVM IR (Halide's CodeGen_LLVM is the model).
//
// Shape of the output: `i32 @name(ptr %args)` unpacks the argument array and calls
// `@name.body(ptr noalias align 64 dereferenceable(n) ...)`, which O3 inlines (turning
// noalias into scoped alias metadata). Each parallel For becomes `@name.par<k>(begin, end,
// closure)`, which unpacks a closure of everything in scope and calls an inner function whose
// buffer parameters are again noalias, handed to ktune_parallel_for.
#include "codegen/llvm_module.h"

#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/llvm_dot.h"
#include "support/error.h"
#include "te/bfloat16.h"

namespace ktune::codegen {
namespace {

using te::DataType;
using te::Expr;
using te::NodeKind;
using te::Stmt;

constexpr int64_t kBufferAlign = 64;  // DESIGN.md: every buffer is 64-byte aligned
constexpr int32_t kOutOfMemory = 1;

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::kBuild, "codegen: " + what);
}

// What is known of an integer expression: e == rem (mod modulus); modulus 0 means e == rem.
struct ModRem {
  int64_t modulus = 1;
  int64_t rem = 0;
};

int64_t gcd0(int64_t a, int64_t b) { return std::gcd(a < 0 ? -a : a, b < 0 ? -b : b); }

ModRem normalize(ModRem m) {
  if (m.modulus != 0) {
    m.rem %= m.modulus;
    if (m.rem < 0) m.rem += m.modulus;
  }
  return m;
}

struct BufferInfo {
  llvm::Value* ptr = nullptr;
  int64_t bytes = 0;  // size when known (arguments, allocations), for dereferenceable
};

class Translator {
 public:
  Translator(const te::LoweredFunc& f, llvm::LLVMContext& ctx, llvm::TargetMachine& tm,
             const BuildOptions& opt)
      : f_(f), ctx_(ctx), tm_(tm), opt_(opt), builder_(ctx) {
    module_ = std::make_unique<llvm::Module>(f.name, ctx);
    module_->setTargetTriple(tm.getTargetTriple().str());
    module_->setDataLayout(tm.createDataLayout());
    llvm::FastMathFlags fmf;
    if (opt.allow_fma) fmf.setAllowContract(true);
    builder_.setFastMathFlags(fmf);
  }

  std::unique_ptr<llvm::Module> run() {
    if (f_.name.empty()) fail("the function has no name");
    if (!f_.body.defined()) fail("function '" + f_.name + "' has no body");
    llvm::Type* ptr = builder_.getPtrTy();

    // The body function: one noalias, aligned parameter per buffer argument.
    std::vector<llvm::Type*> params(f_.args.size(), ptr);
    auto* body_ty = llvm::FunctionType::get(builder_.getInt32Ty(), params, false);
    llvm::Function* body =
        make_function(body_ty, f_.name + ".body", llvm::Function::InternalLinkage);
    for (size_t i = 0; i < f_.args.size(); ++i) {
      const te::BufferArg& a = f_.args[i];
      if (!a.buffer.defined()) fail("argument " + std::to_string(i) + " has no buffer");
      const int64_t bytes = a.num_elements() * a.buffer.dtype().bytes();
      mark_buffer_param(body, static_cast<unsigned>(i), bytes);
      body->getArg(static_cast<unsigned>(i))->setName(a.buffer.name());
      buffers_[a.buffer.get()] = {body->getArg(static_cast<unsigned>(i)), bytes};
    }
    enter_function(body);
    emit_stmt(f_.body);
    builder_.CreateRet(builder_.getInt32(0));

    // The exported entry with the kernel ABI.
    auto* entry_ty = llvm::FunctionType::get(builder_.getInt32Ty(), {ptr}, false);
    llvm::Function* entry = make_function(entry_ty, f_.name, llvm::Function::ExternalLinkage);
    entry->getArg(0)->setName("args");
    builder_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    std::vector<llvm::Value*> unpacked;
    for (size_t i = 0; i < f_.args.size(); ++i) {
      llvm::Value* slot = builder_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i);
      unpacked.push_back(
          builder_.CreateAlignedLoad(ptr, slot, llvm::Align(8), f_.args[i].buffer.name()));
    }
    builder_.CreateRet(builder_.CreateCall(body, unpacked));

    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*module_, &os))
      fail("generated invalid LLVM IR for '" + f_.name + "': " + os.str());
    return std::move(module_);
  }

 private:
  // ------------------------------------------------------------------ functions

  llvm::Function* make_function(llvm::FunctionType* ty, const std::string& name,
                                llvm::GlobalValue::LinkageTypes link) {
    llvm::Function* fn = llvm::Function::Create(ty, link, name, module_.get());
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr("target-cpu", tm_.getTargetCPU());
    fn->addFnAttr("target-features", tm_.getTargetFeatureString());
    return fn;
  }

  void mark_buffer_param(llvm::Function* fn, unsigned i, int64_t bytes) {
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(kBufferAlign)));
    if (bytes > 0) fn->addParamAttr(i, llvm::Attribute::getWithDereferenceableBytes(ctx_, bytes));
  }

  void enter_function(llvm::Function* fn) {
    fn_ = fn;
    alloca_block_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
    builder_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "body", fn));
    llvm::IRBuilder<> b(alloca_block_);
    b.CreateBr(builder_.GetInsertBlock());
  }

  // An alloca in the function's entry block, so a loop does not grow the stack.
  llvm::AllocaInst* entry_alloca(llvm::Type* ty, const std::string& name, uint64_t align) {
    llvm::IRBuilder<> b(alloca_block_, alloca_block_->getFirstInsertionPt());
    llvm::AllocaInst* a = b.CreateAlloca(ty, nullptr, name);
    a->setAlignment(llvm::Align(align));
    return a;
  }

  // ------------------------------------------------------------------ types

  llvm::Type* scalar_type(DataType t) {
    if (t.is_float()) {
      // bfloat16 is held as its bits: LLVM would widen a select or a shuffle of bfloat values
      // to float and narrow it back through a library call on targets without AVX-512 BF16.
      if (t.is_bfloat16()) return builder_.getInt16Ty();
      if (t.bits == 32) return builder_.getFloatTy();
      if (t.bits == 64) return builder_.getDoubleTy();
      if (t.bits == 16) return builder_.getHalfTy();
      fail("unsupported float width " + std::to_string(t.bits));
    }
    if (t.bits == 1 || t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)
      return builder_.getIntNTy(t.bits);
    fail("unsupported integer width " + std::to_string(t.bits));
  }
  llvm::Type* type_of(DataType t) {
    llvm::Type* s = scalar_type(t.element_of());
    return t.lanes > 1 ? llvm::FixedVectorType::get(s, t.lanes) : s;
  }
  // In memory a bool is a byte.
  llvm::Type* memory_type(DataType t) {
    return type_of(t.is_bool() ? DataType::UInt(8, t.lanes) : t);
  }

  // ------------------------------------------------------------------ alignment

  ModRem mod_rem(const Expr& e) {
    if (const auto* i = e.as<te::IntImm>()) return {0, i->value};
    if (const auto* v = e.as<te::VarNode>()) {
      auto it = known_.find(v);
      return it == known_.end() ? ModRem{} : it->second;
    }
    if (const auto* a = e.as<te::Add>()) {
      ModRem x = mod_rem(a->a), y = mod_rem(a->b);
      return normalize({gcd0(x.modulus, y.modulus), x.rem + y.rem});
    }
    if (const auto* s = e.as<te::Sub>()) {
      ModRem x = mod_rem(s->a), y = mod_rem(s->b);
      return normalize({gcd0(x.modulus, y.modulus), x.rem - y.rem});
    }
    if (const auto* m = e.as<te::Mul>()) {
      ModRem x = mod_rem(m->a), y = mod_rem(m->b);
      return normalize(
          {gcd0(gcd0(x.modulus * y.modulus, x.modulus * y.rem), y.modulus * x.rem), x.rem * y.rem});
    }
    return {};
  }

  // Bytes of alignment provable for buffer + index (a scalar element index).
  uint64_t alignment_of(const Expr& index, int elem_bytes) {
    ModRem m = mod_rem(index);
    int64_t g = gcd0(gcd0(m.modulus * elem_bytes, m.rem * elem_bytes), kBufferAlign);
    if (g == 0) g = kBufferAlign;
    uint64_t a = 1;
    while (a * 2 <= static_cast<uint64_t>(g) && g % static_cast<int64_t>(a * 2) == 0) a *= 2;
    return std::max<uint64_t>(a, static_cast<uint64_t>(elem_bytes));
  }

  // ------------------------------------------------------------------ expressions

  llvm::Value* emit(const Expr& e) {
    if (!e.defined()) fail("undefined expression");
    switch (e.kind()) {
      case NodeKind::kIntImm:
        return llvm::ConstantInt::get(type_of(e.dtype()),
                                      static_cast<uint64_t>(e.as<te::IntImm>()->value), true);
      case NodeKind::kFloatImm:
        if (e.dtype().is_bfloat16())
          return llvm::ConstantInt::get(
              type_of(e.dtype()),
              te::float_to_bfloat16(static_cast<float>(e.as<te::FloatImm>()->value)));
        return llvm::ConstantFP::get(type_of(e.dtype()), e.as<te::FloatImm>()->value);
      case NodeKind::kVar: {
        auto it = vars_.find(e.as<te::VarNode>());
        if (it == vars_.end()) fail("undefined variable '" + e.as<te::VarNode>()->name + "'");
        return it->second;
      }
      case NodeKind::kAdd:
        return arith(e, e.as<te::Add>()->a, e.as<te::Add>()->b);
      case NodeKind::kSub:
        return arith(e, e.as<te::Sub>()->a, e.as<te::Sub>()->b);
      case NodeKind::kMul:
        return arith(e, e.as<te::Mul>()->a, e.as<te::Mul>()->b);
      case NodeKind::kDiv:
        return divide(e.as<te::Div>()->a, e.as<te::Div>()->b);
      case NodeKind::kMod:
        return modulo(e.as<te::Mod>()->a, e.as<te::Mod>()->b);
      case NodeKind::kMin:
        return min_max(e.as<te::Min>()->a, e.as<te::Min>()->b, true);
      case NodeKind::kMax:
        return min_max(e.as<te::Max>()->a, e.as<te::Max>()->b, false);
      case NodeKind::kEQ:
        return compare(e.kind(), e.as<te::EQ>()->a, e.as<te::EQ>()->b);
      case NodeKind::kNE:
        return compare(e.kind(), e.as<te::NE>()->a, e.as<te::NE>()->b);
      case NodeKind::kLT:
        return compare(e.kind(), e.as<te::LT>()->a, e.as<te::LT>()->b);
      case NodeKind::kLE:
        return compare(e.kind(), e.as<te::LE>()->a, e.as<te::LE>()->b);
      case NodeKind::kGT:
        return compare(e.kind(), e.as<te::GT>()->a, e.as<te::GT>()->b);
      case NodeKind::kGE:
        return compare(e.kind(), e.as<te::GE>()->a, e.as<te::GE>()->b);
      case NodeKind::kAnd:
        return builder_.CreateAnd(emit(e.as<te::And>()->a), emit(e.as<te::And>()->b));
      case NodeKind::kOr:
        return builder_.CreateOr(emit(e.as<te::Or>()->a), emit(e.as<te::Or>()->b));
      case NodeKind::kNot:
        return builder_.CreateNot(emit(e.as<te::Not>()->a));
      case NodeKind::kSelect: {
        const auto* s = e.as<te::Select>();
        llvm::Value* c = emit(s->condition);
        llvm::Value* t = emit(s->true_value);
        llvm::Value* f = emit(s->false_value);
        return builder_.CreateSelect(c, t, f);
      }
      case NodeKind::kCast:
        return cast(e.dtype(), e.as<te::Cast>()->value);
      case NodeKind::kCall:
        return call(e.as<te::Call>());
      case NodeKind::kRamp: {
        const auto* r = e.as<te::Ramp>();
        llvm::Value* base = builder_.CreateVectorSplat(r->lanes, emit(r->base));
        llvm::Value* stride = builder_.CreateVectorSplat(r->lanes, emit(r->stride));
        std::vector<llvm::Constant*> steps;
        llvm::Type* elem = type_of(r->base.dtype());
        for (int i = 0; i < r->lanes; ++i) steps.push_back(llvm::ConstantInt::get(elem, i));
        return builder_.CreateAdd(base,
                                  builder_.CreateMul(stride, llvm::ConstantVector::get(steps)));
      }
      case NodeKind::kBroadcast: {
        const auto* b = e.as<te::Broadcast>();
        return builder_.CreateVectorSplat(b->lanes, emit(b->value));
      }
      case NodeKind::kLet: {
        const auto* l = e.as<te::Let>();
        llvm::Value* v = emit(l->value);
        ScopedVar bind(*this, l->var, v, l->value);
        return emit(l->body);
      }
      case NodeKind::kLoad:
        return load(e.as<te::Load>());
      default:
        fail("expression kind " + std::to_string(static_cast<int>(e.kind())) +
             " must not remain after lowering (TensorRead/Reduce/BufferLoad)");
    }
  }

  llvm::Value* arith(const Expr& e, const Expr& a, const Expr& b) {
    llvm::Value* x = emit(a);
    llvm::Value* y = emit(b);
    const bool fp = e.dtype().is_float();
    // Index arithmetic (Int(64)) never wraps; saying so helps LLVM's loop analyses.
    const bool nsw = e.dtype().is_int() && e.dtype().bits == 64;
    switch (e.kind()) {
      case NodeKind::kAdd:
        return fp ? builder_.CreateFAdd(x, y) : builder_.CreateAdd(x, y, "", false, nsw);
      case NodeKind::kSub:
        return fp ? builder_.CreateFSub(x, y) : builder_.CreateSub(x, y, "", false, nsw);
      default:
        return fp ? builder_.CreateFMul(x, y) : builder_.CreateMul(x, y, "", false, nsw);
    }
  }

  // Positive power of two c when e is such a constant (or a Broadcast of one), else 0.
  static int64_t pow2_const(const Expr& e) {
    const int64_t* v = te::as_const_int(e);
    if (!v) {
      if (const auto* b = e.as<te::Broadcast>()) v = te::as_const_int(b->value);
    }
    return v && *v > 0 && (*v & (*v - 1)) == 0 ? *v : 0;
  }

  llvm::Value* divide(const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    llvm::Value* x = emit(a);
    llvm::Value* y = emit(b);
    if (t.is_float()) return builder_.CreateFDiv(x, y);
    if (t.is_uint()) return builder_.CreateUDiv(x, y);
    if (int64_t c = pow2_const(b)) {  // floor division by 2^k is an arithmetic shift
      int k = 0;
      while ((int64_t{1} << k) < c) ++k;
      return builder_.CreateAShr(x, llvm::ConstantInt::get(x->getType(), k));
    }
    // Floor division: truncating quotient, minus one when the remainder's sign differs from y's.
    llvm::Value* q = builder_.CreateSDiv(x, y);
    llvm::Value* r = builder_.CreateSRem(x, y);
    llvm::Value* zero = llvm::Constant::getNullValue(x->getType());
    llvm::Value* adjust = builder_.CreateAnd(
        builder_.CreateICmpNE(r, zero),
        builder_.CreateICmpNE(builder_.CreateICmpSLT(r, zero), builder_.CreateICmpSLT(y, zero)));
    return builder_.CreateSub(q, builder_.CreateZExt(adjust, x->getType()));
  }

  llvm::Value* modulo(const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    llvm::Value* x = emit(a);
    llvm::Value* y = emit(b);
    if (t.is_float()) {
      llvm::Value* q = unary_intrinsic(llvm::Intrinsic::floor, builder_.CreateFDiv(x, y));
      return builder_.CreateFSub(x, builder_.CreateFMul(y, q));
    }
    if (t.is_uint()) return builder_.CreateURem(x, y);
    if (int64_t c = pow2_const(b))
      return builder_.CreateAnd(x, llvm::ConstantInt::get(x->getType(), c - 1));
    llvm::Value* r = builder_.CreateSRem(x, y);
    llvm::Value* zero = llvm::Constant::getNullValue(x->getType());
    llvm::Value* adjust = builder_.CreateAnd(
        builder_.CreateICmpNE(r, zero),
        builder_.CreateICmpNE(builder_.CreateICmpSLT(r, zero), builder_.CreateICmpSLT(y, zero)));
    return builder_.CreateSelect(adjust, builder_.CreateAdd(r, y), r);
  }

  llvm::Value* min_max(const Expr& a, const Expr& b, bool is_min) {
    DataType t = a.dtype();
    llvm::Value* x = emit(a);
    llvm::Value* y = emit(b);
    llvm::Value* less;  // y < x picks y for min, x < y picks y for max (std::min/std::max)
    if (t.is_float()) {
      less = is_min ? builder_.CreateFCmpOLT(y, x) : builder_.CreateFCmpOLT(x, y);
    } else if (t.is_uint()) {
      less = is_min ? builder_.CreateICmpULT(y, x) : builder_.CreateICmpULT(x, y);
    } else {
      less = is_min ? builder_.CreateICmpSLT(y, x) : builder_.CreateICmpSLT(x, y);
    }
    return builder_.CreateSelect(less, y, x);
  }

  llvm::Value* compare(NodeKind k, const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    llvm::Value* x = emit(a);
    llvm::Value* y = emit(b);
    using P = llvm::CmpInst::Predicate;
    P p;
    if (t.is_float()) {
      p = k == NodeKind::kEQ   ? P::FCMP_OEQ
          : k == NodeKind::kNE ? P::FCMP_UNE
          : k == NodeKind::kLT ? P::FCMP_OLT
          : k == NodeKind::kLE ? P::FCMP_OLE
          : k == NodeKind::kGT ? P::FCMP_OGT
                               : P::FCMP_OGE;
      return builder_.CreateFCmp(p, x, y);
    }
    const bool u = t.is_uint();
    p = k == NodeKind::kEQ   ? P::ICMP_EQ
        : k == NodeKind::kNE ? P::ICMP_NE
        : k == NodeKind::kLT ? (u ? P::ICMP_ULT : P::ICMP_SLT)
        : k == NodeKind::kLE ? (u ? P::ICMP_ULE : P::ICMP_SLE)
        : k == NodeKind::kGT ? (u ? P::ICMP_UGT : P::ICMP_SGT)
                             : (u ? P::ICMP_UGE : P::ICMP_SGE);
    return builder_.CreateICmp(p, x, y);
  }

  // bfloat16 converts through float32 (llvm_dot.h).
  llvm::Value* cast(DataType to, const Expr& value) {
    DataType from = value.dtype();
    llvm::Value* v = emit(value);
    if (from == to) return v;
    if (from.is_bfloat16()) {
      v = emit_bfloat16_to_float(builder_, v);
      from = DataType::Float(32, from.lanes);
    }
    if (to.is_bfloat16())
      return emit_float_to_bfloat16(builder_, convert(DataType::Float(32, to.lanes), from, v));
    return convert(to, from, v);
  }

  // v of type `from` as type `to` (neither bfloat16).
  llvm::Value* convert(DataType to, DataType from, llvm::Value* v) {
    llvm::Type* ty = type_of(to);
    if (from == to) return v;
    if (to.is_bool()) {
      llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
      return from.is_float() ? builder_.CreateFCmpUNE(v, zero) : builder_.CreateICmpNE(v, zero);
    }
    if (from.is_float() && to.is_float()) return builder_.CreateFPCast(v, ty);
    if (from.is_float())
      return to.is_int() ? builder_.CreateFPToSI(v, ty) : builder_.CreateFPToUI(v, ty);
    if (to.is_float())
      return from.is_int() ? builder_.CreateSIToFP(v, ty) : builder_.CreateUIToFP(v, ty);
    return from.is_int() ? builder_.CreateSExtOrTrunc(v, ty) : builder_.CreateZExtOrTrunc(v, ty);
  }

  llvm::Value* unary_intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return builder_.CreateUnaryIntrinsic(id, x);
  }

  // exp of float32 lanes in vector instructions: libm's expf has no vector form here, and the
  // vectorizer would call it once per lane (a Softmax or a GELU epilogue then ran at a few ns
  // per element). Cephes' expf: n = round(x log2 e), r = x - n ln 2 (in two parts), a degree-5
  // polynomial for e^r, and 2^n built in the exponent bits. Relative error below 2 ulp on
  // [-87.3, 88.0] (2^n stays a normal float); inputs beyond are clamped, NaN stays NaN.
  llvm::Value* exp_f32(llvm::Value* x) {
    llvm::Type* ft = x->getType();
    llvm::Type* it = llvm::Type::getInt32Ty(ctx_);
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(ft))
      it = llvm::VectorType::get(it, vt->getElementCount());
    const auto c = [&](double v) { return llvm::ConstantFP::get(ft, v); };
    llvm::Value* xc = builder_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, c(88.0296919));
    xc = builder_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, xc, c(-87.3365447));
    llvm::Value* n = unary_intrinsic(
        llvm::Intrinsic::floor,
        builder_.CreateFAdd(builder_.CreateFMul(xc, c(1.44269504088896341)), c(0.5)));
    llvm::Value* r = builder_.CreateFSub(xc, builder_.CreateFMul(n, c(0.693359375)));
    r = builder_.CreateFSub(r, builder_.CreateFMul(n, c(-2.12194440e-4)));
    llvm::Value* p = c(1.9875691500e-4);
    for (double k :
         {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
      p = builder_.CreateFAdd(builder_.CreateFMul(p, r), c(k));
    llvm::Value* r2 = builder_.CreateFMul(r, r);
    llvm::Value* e =
        builder_.CreateFAdd(builder_.CreateFAdd(builder_.CreateFMul(p, r2), r), c(1.0));
    llvm::Value* bits = builder_.CreateShl(
        builder_.CreateAdd(builder_.CreateFPToSI(n, it), llvm::ConstantInt::get(it, 127)),
        llvm::ConstantInt::get(it, 23));
    llvm::Value* result = builder_.CreateFMul(e, builder_.CreateBitCast(bits, ft));
    // NaN in, NaN out (minnum/maxnum would have turned it into a bound).
    return builder_.CreateSelect(builder_.CreateFCmpUNO(x, x), x, result);
  }

  // exp through exp_f32 for float32, LLVM's intrinsic otherwise.
  llvm::Value* exp(llvm::Value* x) {
    return x->getType()->getScalarType()->isFloatTy() ? exp_f32(x)
                                                      : unary_intrinsic(llvm::Intrinsic::exp, x);
  }

  // tanh(x) for float32 in vector instructions (as exp_f32), Cephes' tanhf: 1 - 2 / (e^(2x) + 1)
  // from |x| = 0.625 on, and below it x + x z P(z), z = x^2, since there the subtraction from 1
  // would lose the leading digits (a relative error of 6e-8 / |x|); the intrinsic otherwise.
  llvm::Value* tanh(llvm::Value* x) {
    if (!x->getType()->getScalarType()->isFloatTy())
      return unary_intrinsic(llvm::Intrinsic::tanh, x);
    const auto c = [&](double v) { return llvm::ConstantFP::get(x->getType(), v); };
    llvm::Value* e2x = exp_f32(builder_.CreateFAdd(x, x));
    llvm::Value* large =
        builder_.CreateFSub(c(1.0), builder_.CreateFDiv(c(2.0), builder_.CreateFAdd(e2x, c(1.0))));
    llvm::Value* z = builder_.CreateFMul(x, x);
    llvm::Value* p = c(-5.70498872745e-3);
    for (double k : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
      p = builder_.CreateFAdd(builder_.CreateFMul(p, z), c(k));
    llvm::Value* small = builder_.CreateFAdd(builder_.CreateFMul(builder_.CreateFMul(p, z), x), x);
    llvm::Value* near_zero =
        builder_.CreateFCmpOLT(unary_intrinsic(llvm::Intrinsic::fabs, x), c(0.625));
    return builder_.CreateSelect(near_zero, small, large);
  }

  llvm::Value* call(const te::Call* c) {
    if (c->args.empty())
      fail(std::string("call ") + te::call_op_name(c->op) + " without arguments");
    const DataType t = c->args[0].dtype();
    llvm::Value* x = emit(c->args[0]);
    if (c->op == te::CallOp::kDotU8S8 || c->op == te::CallOp::kDotS8S8) {
      if (c->args.size() != 3)
        fail(std::string(te::call_op_name(c->op)) + " takes three arguments");
      const bool s8 = c->op == te::CallOp::kDotS8S8;
      return emit_dot_bytes(builder_, tm_, s8, x, emit(c->args[1]), emit(c->args[2]));
    }
    if (c->op == te::CallOp::kDotBF16) {
      if (c->args.size() != 3) fail("dot_bf16 takes three arguments");
      return emit_dot_bf16(builder_, tm_, x, emit(c->args[1]), emit(c->args[2]));
    }
    if (c->op == te::CallOp::kAbs && !t.is_float()) {
      if (t.is_uint()) return x;
      return builder_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, builder_.getFalse());
    }
    if (!t.is_float())
      fail(std::string("math call ") + te::call_op_name(c->op) + " on a non-float type");
    switch (c->op) {
      case te::CallOp::kExp:
        return exp(x);
      case te::CallOp::kLog:
        return unary_intrinsic(llvm::Intrinsic::log, x);
      case te::CallOp::kSqrt:
        return unary_intrinsic(llvm::Intrinsic::sqrt, x);
      case te::CallOp::kTanh:
        return tanh(x);
      case te::CallOp::kAbs:
        return unary_intrinsic(llvm::Intrinsic::fabs, x);
      case te::CallOp::kFloor:
        return unary_intrinsic(llvm::Intrinsic::floor, x);
      case te::CallOp::kCeil:
        return unary_intrinsic(llvm::Intrinsic::ceil, x);
      case te::CallOp::kRoundEven:
        return unary_intrinsic(llvm::Intrinsic::roundeven, x);
      case te::CallOp::kPow:
        if (c->args.size() != 2) fail("pow takes two arguments");
        return builder_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, emit(c->args[1]));
      case te::CallOp::kSigmoid: {
        llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
        llvm::Value* e = exp(builder_.CreateFNeg(x));
        return builder_.CreateFDiv(one, builder_.CreateFAdd(one, e));
      }
      case te::CallOp::kDotU8S8:
      case te::CallOp::kDotS8S8:
      case te::CallOp::kDotBF16:
        break;  // handled above
    }
    fail("unknown math call");
  }

  const BufferInfo& buffer(const te::Buffer& b) {
    auto it = buffers_.find(b.get());
    if (it == buffers_.end())
      fail("buffer '" + (b.defined() ? b.name() : std::string("?")) + "' is not in scope");
    return it->second;
  }

  // A contiguous vector access: the Ramp's base when index is Ramp(base, 1, lanes).
  static const te::Ramp* dense_ramp(const Expr& index) {
    const auto* r = index.as<te::Ramp>();
    return r && te::is_const_int(r->stride, 1) ? r : nullptr;
  }

  llvm::Value* load(const te::Load* l) {
    const BufferInfo& buf = buffer(l->buffer);
    const DataType elem = l->buffer.dtype();
    llvm::Type* mem_elem = memory_type(elem);
    const int lanes = l->dtype.lanes;
    llvm::Value* result;
    if (lanes == 1) {
      llvm::Value* p = builder_.CreateInBoundsGEP(mem_elem, buf.ptr, emit(l->index));
      result = builder_.CreateAlignedLoad(mem_elem, p,
                                          llvm::Align(alignment_of(l->index, elem.bytes())));
    } else if (const te::Ramp* r = dense_ramp(l->index)) {
      llvm::Value* p = builder_.CreateInBoundsGEP(mem_elem, buf.ptr, emit(r->base));
      llvm::Type* vt = llvm::FixedVectorType::get(mem_elem, lanes);
      result = builder_.CreateAlignedLoad(vt, p, llvm::Align(alignment_of(r->base, elem.bytes())));
    } else {
      // Strided loads and gathers: per-lane scalar loads, which LLVM may recombine.
      llvm::Value* idx = emit(l->index);
      result = llvm::PoisonValue::get(llvm::FixedVectorType::get(mem_elem, lanes));
      for (int i = 0; i < lanes; ++i) {
        llvm::Value* p =
            builder_.CreateInBoundsGEP(mem_elem, buf.ptr, builder_.CreateExtractElement(idx, i));
        llvm::Value* v = builder_.CreateAlignedLoad(mem_elem, p, llvm::Align(elem.bytes()));
        result = builder_.CreateInsertElement(result, v, i);
      }
    }
    if (elem.is_bool())
      result = builder_.CreateICmpNE(result, llvm::Constant::getNullValue(result->getType()));
    return result;
  }

  // ------------------------------------------------------------------ statements

  // Binds a variable for the lifetime of the scope (and what is known of it, for alignment).
  class ScopedVar {
   public:
    ScopedVar(Translator& t, const te::Var& v, llvm::Value* value, const Expr& def)
        : t_(t), key_(v.get()) {
      if (t_.vars_.count(key_)) fail("variable '" + v.name() + "' is bound twice");
      t_.vars_[key_] = value;
      if (def.defined() && def.dtype().is_int() && def.dtype().lanes == 1)
        t_.known_[key_] = t_.mod_rem(def);
    }
    ~ScopedVar() {
      t_.vars_.erase(key_);
      t_.known_.erase(key_);
    }
    ScopedVar(const ScopedVar&) = delete;
    ScopedVar& operator=(const ScopedVar&) = delete;

   private:
    Translator& t_;
    const te::VarNode* key_;
  };

  void emit_stmt(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case NodeKind::kFor:
        return emit_for(s.as<te::For>());
      case NodeKind::kStore:
        return emit_store(s.as<te::Store>());
      case NodeKind::kAllocate:
        return emit_allocate(s.as<te::Allocate>());
      case NodeKind::kIfThenElse:
        return emit_if(s.as<te::IfThenElse>());
      case NodeKind::kLetStmt: {
        const auto* l = s.as<te::LetStmt>();
        llvm::Value* v = emit(l->value);
        ScopedVar bind(*this, l->var, v, l->value);
        return emit_stmt(l->body);
      }
      case NodeKind::kBlock:
        for (const Stmt& x : s.as<te::Block>()->stmts) emit_stmt(x);
        return;
      case NodeKind::kEvaluate:
        emit(s.as<te::Evaluate>()->value);
        return;
      default:
        fail("statement kind " + std::to_string(static_cast<int>(s.kind())) +
             " must not remain after lowering (BufferStore/Realize)");
    }
  }

  void emit_store(const te::Store* st) {
    const BufferInfo& buf = buffer(st->buffer);
    const DataType elem = st->buffer.dtype();
    llvm::Type* mem_elem = memory_type(elem);
    llvm::Value* v = emit(st->value);
    if (elem.is_bool()) v = builder_.CreateZExt(v, memory_type(st->value.dtype()));
    const int lanes = st->value.dtype().lanes;
    if (lanes == 1) {
      if (st->index.dtype().lanes != 1) fail("scalar store through a vector index");
      llvm::Value* p = builder_.CreateInBoundsGEP(mem_elem, buf.ptr, emit(st->index));
      builder_.CreateAlignedStore(v, p, llvm::Align(alignment_of(st->index, elem.bytes())));
    } else if (const te::Ramp* r = dense_ramp(st->index)) {
      llvm::Value* p = builder_.CreateInBoundsGEP(mem_elem, buf.ptr, emit(r->base));
      builder_.CreateAlignedStore(v, p, llvm::Align(alignment_of(r->base, elem.bytes())));
    } else {
      llvm::Value* idx = emit(st->index);
      if (st->index.dtype().lanes != lanes) fail("store index and value lanes differ");
      for (int i = 0; i < lanes; ++i) {
        llvm::Value* p =
            builder_.CreateInBoundsGEP(mem_elem, buf.ptr, builder_.CreateExtractElement(idx, i));
        builder_.CreateAlignedStore(builder_.CreateExtractElement(v, i), p,
                                    llvm::Align(elem.bytes()));
      }
    }
  }

  void emit_if(const te::IfThenElse* op) {
    llvm::Value* c = emit(op->condition);
    if (c->getType()->isVectorTy()) fail("IfThenElse on a vector condition");
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
    auto* else_bb = op->else_case.defined() ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
    auto* done_bb = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    builder_.CreateCondBr(c, then_bb, else_bb ? else_bb : done_bb);
    builder_.SetInsertPoint(then_bb);
    emit_stmt(op->then_case);
    builder_.CreateBr(done_bb);
    if (else_bb) {
      builder_.SetInsertPoint(else_bb);
      emit_stmt(op->else_case);
      builder_.CreateBr(done_bb);
    }
    builder_.SetInsertPoint(done_bb);
  }

  void emit_allocate(const te::Allocate* op) {
    const int64_t* extent = te::as_const_int(op->extent);
    if (!extent || *extent < 0)
      fail("Allocate of '" + op->buffer.name() + "' needs a constant, non-negative extent");
    llvm::Type* elem = memory_type(op->buffer.dtype());
    const int64_t bytes = std::max<int64_t>(1, *extent * op->buffer.dtype().bytes());
    llvm::Value* ptr;
    llvm::Value* heap = nullptr;
    if (bytes <= opt_.max_stack_bytes) {
      ptr = entry_alloca(
          llvm::ArrayType::get(elem, static_cast<uint64_t>(std::max<int64_t>(1, *extent))),
          op->buffer.name(), kBufferAlign);
    } else {
      // The runtime's workspace (64-byte aligned): it keeps released blocks for the next call,
      // where malloc may hand a large one back to the system and fault it in again.
      const int64_t rounded = (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
      llvm::FunctionCallee alloc = module_->getOrInsertFunction(
          "ktune_workspace_alloc",
          llvm::FunctionType::get(builder_.getPtrTy(), {builder_.getInt64Ty()}, false));
      heap = builder_.CreateCall(alloc, {builder_.getInt64(rounded)}, op->buffer.name());
      auto* ok = llvm::BasicBlock::Create(ctx_, "alloc_ok", fn_);
      auto* oom = llvm::BasicBlock::Create(ctx_, "alloc_failed", fn_);
      builder_.CreateCondBr(builder_.CreateIsNull(heap), oom, ok);
      builder_.SetInsertPoint(oom);
      // Out of memory ends the kernel with a status; enclosing heap buffers are not freed on
      // this path (the caller treats the status as a failed run).
      builder_.CreateRet(builder_.getInt32(kOutOfMemory));
      builder_.SetInsertPoint(ok);
      ptr = heap;
    }
    if (buffers_.count(op->buffer.get()))
      fail("buffer '" + op->buffer.name() + "' is allocated twice");
    buffers_[op->buffer.get()] = {ptr, bytes};
    emit_stmt(op->body);
    buffers_.erase(op->buffer.get());
    if (heap) {
      llvm::FunctionCallee free_fn = module_->getOrInsertFunction(
          "ktune_workspace_free",
          llvm::FunctionType::get(builder_.getVoidTy(), {builder_.getPtrTy()}, false));
      builder_.CreateCall(free_fn, {heap});
    }
  }

  void emit_for(const te::For* op) {
    if (op->for_kind == te::ForKind::kParallel) return emit_parallel(op);
    const int64_t* extent = te::as_const_int(op->extent);
    const int64_t* min = te::as_const_int(op->min);
    if (op->for_kind == te::ForKind::kUnrolled && extent && min && *extent <= 256) {
      // te normally unrolls itself; a kUnrolled loop left over is copied here.
      for (int64_t i = 0; i < *extent; ++i) {
        Expr value = te::IntImm::make(*min + i, op->var.dtype());
        ScopedVar bind(*this, op->var, emit(value), value);
        emit_stmt(op->body);
      }
      return;
    }
    // kSerial (and a kVectorized loop te could not turn into vectors) is a plain loop.
    emit_serial_loop(op->var, emit(op->min), emit(op->extent), op->body);
  }

  // for (var = begin; var < begin + extent; ++var) body, bottom-tested behind a guard.
  void emit_serial_loop(const te::Var& var, llvm::Value* begin, llvm::Value* extent,
                        const Stmt& body) {
    llvm::Value* end = builder_.CreateAdd(begin, extent, var.name() + ".end", false, true);
    auto* pre = builder_.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(ctx_, var.name() + ".loop", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, var.name() + ".exit", fn_);
    builder_.CreateCondBr(builder_.CreateICmpSLT(begin, end), loop, exit);
    builder_.SetInsertPoint(loop);
    llvm::PHINode* iv = builder_.CreatePHI(begin->getType(), 2, var.name());
    iv->addIncoming(begin, pre);
    {
      ScopedVar bind(*this, var, iv, Expr());
      emit_stmt(body);
    }
    llvm::Value* next = builder_.CreateAdd(iv, llvm::ConstantInt::get(iv->getType(), 1),
                                           var.name() + ".next", true, true);
    iv->addIncoming(next, builder_.GetInsertBlock());
    builder_.CreateCondBr(builder_.CreateICmpSLT(next, end), loop, exit);
    builder_.SetInsertPoint(exit);
  }

  // A parallel For: outline the body, capture every variable and buffer in scope in a closure,
  // and hand the loop to ktune_parallel_for.
  void emit_parallel(const te::For* op) {
    if (!te::is_const_int(op->min, 0))
      fail("parallel loop '" + op->var.name() + "' must start at 0");
    llvm::Value* extent = emit(op->extent);
    llvm::Type* i64 = builder_.getInt64Ty();
    llvm::Type* ptr = builder_.getPtrTy();

    std::vector<const te::BufferNode*> cap_buffers;
    std::vector<const te::VarNode*> cap_vars;
    std::vector<llvm::Type*> fields;
    for (auto& [b, info] : buffers_) {
      cap_buffers.push_back(b);
      fields.push_back(ptr);
    }
    for (auto& [v, value] : vars_) {
      cap_vars.push_back(v);
      fields.push_back(value->getType());
    }
    auto* closure_ty = llvm::StructType::get(ctx_, fields);
    llvm::Value* closure = entry_alloca(closure_ty, "closure", kBufferAlign);
    for (size_t i = 0; i < cap_buffers.size(); ++i) {
      builder_.CreateStore(buffers_[cap_buffers[i]].ptr,
                           builder_.CreateStructGEP(closure_ty, closure, i));
    }
    for (size_t i = 0; i < cap_vars.size(); ++i) {
      builder_.CreateStore(vars_[cap_vars[i]],
                           builder_.CreateStructGEP(closure_ty, closure, cap_buffers.size() + i));
    }

    // Inner function: (begin, end, captured...) with noalias buffers; holds the loop.
    std::vector<llvm::Type*> inner_params = {i64, i64};
    inner_params.insert(inner_params.end(), fields.begin(), fields.end());
    const std::string base = f_.name + ".par" + std::to_string(parallel_count_++);
    llvm::Function* inner =
        make_function(llvm::FunctionType::get(builder_.getInt32Ty(), inner_params, false),
                      base + ".inner", llvm::Function::InternalLinkage);
    llvm::Function* outlined =
        make_function(llvm::FunctionType::get(builder_.getInt32Ty(), {i64, i64, ptr}, false), base,
                      llvm::Function::InternalLinkage);

    // Save the caller's state; the outlined functions see only what they capture.
    auto saved_buffers = buffers_;
    auto saved_vars = vars_;
    auto saved_known = known_;
    llvm::Function* saved_fn = fn_;
    llvm::BasicBlock* saved_alloca = alloca_block_;
    llvm::BasicBlock* saved_block = builder_.GetInsertBlock();

    buffers_.clear();
    vars_.clear();
    enter_function(inner);
    for (size_t i = 0; i < cap_buffers.size(); ++i) {
      const unsigned arg = static_cast<unsigned>(2 + i);
      mark_buffer_param(inner, arg, saved_buffers[cap_buffers[i]].bytes);
      buffers_[cap_buffers[i]] = {inner->getArg(arg), saved_buffers[cap_buffers[i]].bytes};
    }
    for (size_t i = 0; i < cap_vars.size(); ++i) {
      vars_[cap_vars[i]] = inner->getArg(static_cast<unsigned>(2 + cap_buffers.size() + i));
    }
    known_.erase(op->var.get());
    emit_serial_loop(op->var, inner->getArg(0),
                     builder_.CreateSub(inner->getArg(1), inner->getArg(0)), op->body);
    builder_.CreateRet(builder_.getInt32(0));

    // Outlined body with the runtime's signature: unpack the closure, call inner.
    enter_function(outlined);
    std::vector<llvm::Value*> call_args = {outlined->getArg(0), outlined->getArg(1)};
    for (size_t i = 0; i < fields.size(); ++i) {
      llvm::Value* slot = builder_.CreateStructGEP(closure_ty, outlined->getArg(2), i);
      call_args.push_back(builder_.CreateLoad(fields[i], slot));
    }
    builder_.CreateRet(builder_.CreateCall(inner, call_args));

    buffers_ = std::move(saved_buffers);
    vars_ = std::move(saved_vars);
    known_ = std::move(saved_known);
    fn_ = saved_fn;
    alloca_block_ = saved_alloca;
    builder_.SetInsertPoint(saved_block);

    llvm::FunctionCallee runtime = module_->getOrInsertFunction(
        "ktune_parallel_for",
        llvm::FunctionType::get(builder_.getInt32Ty(), {i64, ptr, ptr}, false));
    llvm::Value* code =
        builder_.CreateCall(runtime, {builder_.CreateSExtOrTrunc(extent, i64), outlined, closure});
    auto* failed = llvm::BasicBlock::Create(ctx_, "parallel_failed", fn_);
    auto* ok = llvm::BasicBlock::Create(ctx_, "parallel_ok", fn_);
    builder_.CreateCondBr(builder_.CreateICmpNE(code, builder_.getInt32(0)), failed, ok);
    builder_.SetInsertPoint(failed);
    builder_.CreateRet(code);
    builder_.SetInsertPoint(ok);
  }

  const te::LoweredFunc& f_;
  llvm::LLVMContext& ctx_;
  llvm::TargetMachine& tm_;
  const BuildOptions& opt_;
  llvm::IRBuilder<> builder_;
  std::unique_ptr<llvm::Module> module_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* alloca_block_ = nullptr;
  std::unordered_map<const te::BufferNode*, BufferInfo> buffers_;
  std::unordered_map<const te::VarNode*, llvm::Value*> vars_;
  std::unordered_map<const te::VarNode*, ModRem> known_;
  int parallel_count_ = 0;
};

}  // namespace

std::unique_ptr<llvm::Module> translate_to_llvm(const te::LoweredFunc& f, llvm::LLVMContext& ctx,
                                                llvm::TargetMachine& tm,
                                                const BuildOptions& options) {
  return Translator(f, ctx, tm, options).run();
}

}  // namespace ktune::codegen
