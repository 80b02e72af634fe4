// build_model_driver(): a model's create/run/destroy entry points written as LLVM IR, so a model
// library needs no C compiler at build time and cross-compiles like its kernels.
#include "codegen/model_driver.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/llvm_module.h"
#include "support/error.h"

namespace ktune::codegen {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
constexpr int64_t kAlign = 64;

void check(const DriverSpec& spec) {
  const auto bad = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument, "model driver '" + spec.name + "': " + why);
  };
  if (spec.name.empty()) throw bad("no name");
  for (const DriverCall& call : spec.calls) {
    if (call.max_threads < 0) throw bad("a negative thread cap for " + call.kernel);
    for (const DriverArg& a : call.args) {
      if (a.offset < 0) throw bad("negative offset in the call of " + call.kernel);
      switch (a.base) {
        case DriverArg::Base::kArena:
          if (a.offset % kAlign != 0 || a.offset >= std::max<int64_t>(spec.arena_bytes, 1))
            throw bad("arena offset " + std::to_string(a.offset) + " of " + call.kernel +
                      " is out of range or unaligned");
          break;
        case DriverArg::Base::kWeights:
          if (a.offset % kAlign != 0 ||
              a.offset >= std::max<int64_t>(static_cast<int64_t>(spec.weights.size()), 1))
            throw bad("weights offset " + std::to_string(a.offset) + " of " + call.kernel +
                      " is out of range or unaligned");
          break;
        case DriverArg::Base::kInput:
          if (a.offset >= spec.num_inputs)
            throw bad("input " + std::to_string(a.offset) + " of " + call.kernel +
                      " does not exist");
          break;
        case DriverArg::Base::kOutput:
          if (a.offset >= spec.num_outputs)
            throw bad("output " + std::to_string(a.offset) + " of " + call.kernel +
                      " does not exist");
          break;
      }
    }
  }
}

// The IR of one driver: the module, its types and the C library functions it calls.
class DriverWriter {
 public:
  DriverWriter(const DriverSpec& spec, llvm::LLVMContext& ctx, llvm::TargetMachine& tm)
      : spec_(spec),
        ctx_(ctx),
        b_(ctx),
        m_(std::make_unique<llvm::Module>(spec.name + "_driver", ctx)) {
    m_->setDataLayout(tm.createDataLayout());
    m_->setTargetTriple(tm.getTargetTriple().str());
    ptr_ = llvm::PointerType::getUnqual(ctx);
    i8_ = llvm::Type::getInt8Ty(ctx);
    i32_ = llvm::Type::getInt32Ty(ctx);
    i64_ = llvm::Type::getInt64Ty(ctx);
    // The context: the arena, the weights in use, and the weights this context allocated.
    ctx_ty_ = llvm::StructType::create(ctx, {ptr_, ptr_, ptr_}, spec.name + "_ctx");
  }

  std::unique_ptr<llvm::Module> write() {
    write_create();
    write_run();
    write_run_args();
    write_destroy();
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*m_, &os))
      throw Error(ErrorKind::kBuild, "model driver IR is invalid: " + os.str());
    return std::move(m_);
  }

 private:
  llvm::FunctionCallee libc(const char* name, llvm::Type* ret, std::vector<llvm::Type*> params) {
    return m_->getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
  }
  llvm::Value* field(llvm::Value* c, unsigned i) { return b_.CreateStructGEP(ctx_ty_, c, i); }
  llvm::Value* i64c(uint64_t v) { return llvm::ConstantInt::get(i64_, v); }

  llvm::GlobalVariable* embedded_weights() {
    auto* data = llvm::ConstantDataArray::getRaw(
        llvm::StringRef(reinterpret_cast<const char*>(spec_.weights.data()), spec_.weights.size()),
        spec_.weights.size(), i8_);
    auto* g =
        new llvm::GlobalVariable(*m_, data->getType(), true, llvm::GlobalValue::PrivateLinkage,
                                 data, spec_.name + "_weights");
    g->setAlignment(llvm::Align(kModelPageAlign));
    return g;
  }

  // aligned_alloc as model_buffer_placement says, and for a huge buffer madvise before anything
  // touches it (madvise of a NULL buffer fails harmlessly; the caller checks the pointer).
  llvm::Value* allocate(int64_t bytes) {
    const ModelBufferPlacement p = model_buffer_placement(bytes);
    auto aligned_alloc_fn = libc("aligned_alloc", ptr_, {i64_, i64_});
    llvm::Value* buf = b_.CreateCall(aligned_alloc_fn, {i64c(p.align), i64c(p.size)});
    if (p.huge)
      b_.CreateCall(libc("madvise", i32_, {ptr_, i64_, i32_}),
                    {buf, i64c(p.size), llvm::ConstantInt::get(i32_, kMadvHugePage)});
    return buf;
  }

  void write_create() {
    const bool external = !spec_.embed_weights;
    auto* fty = llvm::FunctionType::get(
        ptr_, external ? std::vector<llvm::Type*>{ptr_} : std::vector<llvm::Type*>{}, false);
    auto* f =
        llvm::Function::Create(fty, llvm::Function::ExternalLinkage, spec_.name + "_create", *m_);
    auto malloc_fn = libc("malloc", ptr_, {i64_});
    auto free_fn = libc("free", llvm::Type::getVoidTy(ctx_), {ptr_});
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
    auto* fail = llvm::BasicBlock::Create(ctx_, "fail", f);
    auto* have_ctx = llvm::BasicBlock::Create(ctx_, "have_ctx", f);
    auto* have_arena = llvm::BasicBlock::Create(ctx_, "have_arena", f);
    auto* null = llvm::ConstantPointerNull::get(ptr_);

    b_.SetInsertPoint(entry);
    llvm::Value* c =
        b_.CreateCall(malloc_fn, {i64c(m_->getDataLayout().getTypeAllocSize(ctx_ty_))});
    llvm::Value* no_ctx = b_.CreateICmpEQ(c, null);
    auto* fail_early = llvm::BasicBlock::Create(ctx_, "fail_early", f);
    b_.CreateCondBr(no_ctx, fail_early, have_ctx);
    b_.SetInsertPoint(fail_early);
    b_.CreateRet(null);

    b_.SetInsertPoint(have_ctx);
    b_.CreateStore(null, field(c, 0));
    b_.CreateStore(null, field(c, 1));
    b_.CreateStore(null, field(c, 2));
    llvm::Value* arena = allocate(spec_.arena_bytes);
    b_.CreateStore(arena, field(c, 0));
    b_.CreateCondBr(b_.CreateICmpEQ(arena, null), fail, have_arena);

    b_.SetInsertPoint(have_arena);
    if (external) {
      read_weights(f, c, fail);
    } else if (model_buffer_placement(static_cast<int64_t>(spec_.weights.size())).huge) {
      copy_weights(f, c, fail);
    } else {
      b_.CreateStore(spec_.weights.empty() ? static_cast<llvm::Value*>(null) : embedded_weights(),
                     field(c, 1));
      b_.CreateRet(c);
    }

    // Frees what was allocated (free(NULL) is a no-op) and returns NULL.
    b_.SetInsertPoint(fail);
    b_.CreateCall(free_fn, {b_.CreateLoad(ptr_, field(c, 0))});
    b_.CreateCall(free_fn, {b_.CreateLoad(ptr_, field(c, 2))});
    b_.CreateCall(free_fn, {c});
    b_.CreateRet(null);
  }

  // Copies the embedded weights into a buffer on huge pages (kModelHugePage), stores it in the
  // context and returns it; else branches to fail.
  void copy_weights(llvm::Function* f, llvm::Value* c, llvm::BasicBlock* fail) {
    const int64_t size = static_cast<int64_t>(spec_.weights.size());
    auto* copied = llvm::BasicBlock::Create(ctx_, "copy", f);
    llvm::Value* buf = allocate(size);
    b_.CreateStore(buf, field(c, 2));
    b_.CreateCondBr(b_.CreateICmpEQ(buf, llvm::ConstantPointerNull::get(ptr_)), fail, copied);
    b_.SetInsertPoint(copied);
    b_.CreateMemCpy(buf, llvm::MaybeAlign(kModelHugePage), embedded_weights(),
                    llvm::MaybeAlign(kModelPageAlign), i64c(static_cast<uint64_t>(size)));
    b_.CreateStore(buf, field(c, 1));
    b_.CreateRet(c);
  }

  // Reads the weights file named by f's argument into an aligned buffer, checks its size (one byte
  // more must not exist) and hash, stores it in the context and returns it; else branches to fail.
  void read_weights(llvm::Function* f, llvm::Value* c, llvm::BasicBlock* fail) {
    const int64_t size = static_cast<int64_t>(spec_.weights.size());
    const uint64_t hash = weights_hash(spec_.weights);
    auto fopen_fn = libc("fopen", ptr_, {ptr_, ptr_});
    auto fread_fn = libc("fread", i64_, {ptr_, i64_, i64_, ptr_});
    auto fclose_fn = libc("fclose", i32_, {ptr_});
    auto* null = llvm::ConstantPointerNull::get(ptr_);
    auto* opened = llvm::BasicBlock::Create(ctx_, "opened", f);
    auto* allocated = llvm::BasicBlock::Create(ctx_, "allocated", f);
    auto* close_fail = llvm::BasicBlock::Create(ctx_, "close_fail", f);
    auto* loop = llvm::BasicBlock::Create(ctx_, "hash_loop", f);
    auto* done = llvm::BasicBlock::Create(ctx_, "hash_done", f);
    auto* ok = llvm::BasicBlock::Create(ctx_, "ok", f);

    llvm::Value* file = b_.CreateCall(fopen_fn, {f->getArg(0), b_.CreateGlobalStringPtr("rb")});
    b_.CreateCondBr(b_.CreateICmpEQ(file, null), fail, opened);

    b_.SetInsertPoint(opened);
    llvm::Value* buf = allocate(size);
    b_.CreateStore(buf, field(c, 2));
    b_.CreateCondBr(b_.CreateICmpEQ(buf, null), close_fail, allocated);

    b_.SetInsertPoint(close_fail);
    b_.CreateCall(fclose_fn, {file});
    b_.CreateBr(fail);

    b_.SetInsertPoint(allocated);
    llvm::Value* got = b_.CreateCall(fread_fn, {buf, i64c(1), i64c(size), file});
    llvm::Value* extra_byte = b_.CreateAlloca(i8_);
    llvm::Value* extra = b_.CreateCall(fread_fn, {extra_byte, i64c(1), i64c(1), file});
    b_.CreateCall(fclose_fn, {file});
    llvm::Value* size_ok =
        b_.CreateAnd(b_.CreateICmpEQ(got, i64c(size)), b_.CreateICmpEQ(extra, i64c(0)));
    llvm::BasicBlock* read_block = b_.GetInsertBlock();
    b_.CreateCondBr(size_ok, size > 0 ? loop : done, fail);

    // FNV-1a over the bytes read (no loop for an empty file: its hash is the offset basis).
    llvm::Value* final_h = i64c(kFnvOffset);
    if (size > 0) {
      b_.SetInsertPoint(loop);
      llvm::PHINode* i = b_.CreatePHI(i64_, 2);
      llvm::PHINode* h = b_.CreatePHI(i64_, 2);
      i->addIncoming(i64c(0), read_block);
      h->addIncoming(i64c(kFnvOffset), read_block);
      llvm::Value* byte = b_.CreateZExt(b_.CreateLoad(i8_, b_.CreateGEP(i8_, buf, i)), i64_);
      llvm::Value* next_h = b_.CreateMul(b_.CreateXor(h, byte), i64c(kFnvPrime));
      llvm::Value* next_i = b_.CreateAdd(i, i64c(1));
      i->addIncoming(next_i, loop);
      h->addIncoming(next_h, loop);
      b_.CreateCondBr(b_.CreateICmpULT(next_i, i64c(size)), loop, done);
      final_h = next_h;
    } else {
      loop->eraseFromParent();
    }

    b_.SetInsertPoint(done);
    b_.CreateCondBr(b_.CreateICmpEQ(final_h, i64c(hash)), ok, fail);

    b_.SetInsertPoint(ok);
    b_.CreateStore(buf, field(c, 1));
    b_.CreateRet(c);
  }

  void write_run() {
    std::vector<llvm::Type*> params(1 + spec_.num_inputs + spec_.num_outputs, ptr_);
    auto* f = llvm::Function::Create(llvm::FunctionType::get(i32_, params, false),
                                     llvm::Function::ExternalLinkage, spec_.name + "_run", *m_);
    auto* kernel_ty = llvm::FunctionType::get(i32_, {ptr_}, false);
    // Declared only when a call is capped: an uncapped library links with any ktune runtime.
    llvm::FunctionCallee set_cap;
    for (const DriverCall& call : spec_.calls)
      if (call.max_threads > 0) set_cap = libc("ktune_set_thread_cap", i32_, {i32_});
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
    auto* unaligned = llvm::BasicBlock::Create(ctx_, "unaligned", f);
    b_.SetInsertPoint(entry);
    size_t max_args = 1;
    for (const DriverCall& call : spec_.calls) max_args = std::max(max_args, call.args.size());
    llvm::Value* args = b_.CreateAlloca(ptr_, i64c(max_args));
    // Every caller buffer must be 64-byte aligned: the kernels load them with aligned vectors.
    llvm::Value* misaligned = llvm::ConstantInt::getFalse(ctx_);
    for (unsigned p = 1; p < f->arg_size(); ++p) {
      llvm::Value* low = b_.CreateAnd(b_.CreatePtrToInt(f->getArg(p), i64_), i64c(kAlign - 1));
      misaligned = b_.CreateOr(misaligned, b_.CreateICmpNE(low, i64c(0)));
    }
    auto* body = llvm::BasicBlock::Create(ctx_, "body", f);
    b_.CreateCondBr(misaligned, unaligned, body);
    b_.SetInsertPoint(unaligned);
    b_.CreateRet(llvm::ConstantInt::get(i32_, 2));

    b_.SetInsertPoint(body);
    llvm::Value* c = f->getArg(0);
    llvm::Value* arena = b_.CreateLoad(ptr_, field(c, 0), "arena");
    llvm::Value* weights = b_.CreateLoad(ptr_, field(c, 1), "weights");
    auto* failed = llvm::BasicBlock::Create(ctx_, "failed", f);
    llvm::PHINode* status = nullptr;
    {
      llvm::IRBuilder<> fb(failed);
      status = fb.CreatePHI(i32_, static_cast<unsigned>(spec_.calls.size()));
      fb.CreateRet(status);
    }
    for (const DriverCall& call : spec_.calls) {
      for (size_t a = 0; a < call.args.size(); ++a) {
        const DriverArg& arg = call.args[a];
        llvm::Value* p = nullptr;
        switch (arg.base) {
          case DriverArg::Base::kArena:
            p = b_.CreateGEP(i8_, arena, i64c(arg.offset));
            break;
          case DriverArg::Base::kWeights:
            p = b_.CreateGEP(i8_, weights, i64c(arg.offset));
            break;
          case DriverArg::Base::kInput:
            p = f->getArg(1 + static_cast<unsigned>(arg.offset));
            break;
          case DriverArg::Base::kOutput:
            p = f->getArg(1 + spec_.num_inputs + static_cast<unsigned>(arg.offset));
            break;
        }
        b_.CreateStore(p, b_.CreateGEP(ptr_, args, i64c(a)));
      }
      llvm::FunctionCallee kernel = m_->getOrInsertFunction(call.kernel, kernel_ty);
      llvm::Value* previous_cap = nullptr;
      if (call.max_threads > 0)
        previous_cap = b_.CreateCall(set_cap, {llvm::ConstantInt::get(i32_, call.max_threads)});
      llvm::Value* rc = b_.CreateCall(kernel, {args});
      if (previous_cap) b_.CreateCall(set_cap, {previous_cap});
      auto* next = llvm::BasicBlock::Create(ctx_, "next", f);
      status->addIncoming(rc, b_.GetInsertBlock());
      b_.CreateCondBr(b_.CreateICmpNE(rc, llvm::ConstantInt::get(i32_, 0)), failed, next);
      b_.SetInsertPoint(next);
    }
    b_.CreateRet(llvm::ConstantInt::get(i32_, 0));
    if (spec_.calls.empty()) failed->eraseFromParent();
  }

  // <name>_run_args(ctx, buffers): <name>_run with the inputs and outputs from an array, for
  // callers that do not know the arity at compile time (ktune run).
  void write_run_args() {
    llvm::Function* run = m_->getFunction(spec_.name + "_run");
    auto* f =
        llvm::Function::Create(llvm::FunctionType::get(i32_, {ptr_, ptr_}, false),
                               llvm::Function::ExternalLinkage, spec_.name + "_run_args", *m_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    std::vector<llvm::Value*> args = {f->getArg(0)};
    for (int i = 0; i < spec_.num_inputs + spec_.num_outputs; ++i)
      args.push_back(
          b_.CreateLoad(ptr_, b_.CreateGEP(ptr_, f->getArg(1), i64c(static_cast<uint64_t>(i)))));
    b_.CreateRet(b_.CreateCall(run, args));
  }

  void write_destroy() {
    auto* f =
        llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr_}, false),
                               llvm::Function::ExternalLinkage, spec_.name + "_destroy", *m_);
    auto free_fn = libc("free", llvm::Type::getVoidTy(ctx_), {ptr_});
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
    auto* some = llvm::BasicBlock::Create(ctx_, "some", f);
    auto* none = llvm::BasicBlock::Create(ctx_, "none", f);
    b_.SetInsertPoint(entry);
    llvm::Value* c = f->getArg(0);
    b_.CreateCondBr(b_.CreateICmpEQ(c, llvm::ConstantPointerNull::get(ptr_)), none, some);
    b_.SetInsertPoint(some);
    b_.CreateCall(free_fn, {b_.CreateLoad(ptr_, field(c, 0))});
    b_.CreateCall(free_fn, {b_.CreateLoad(ptr_, field(c, 2))});
    b_.CreateCall(free_fn, {c});
    b_.CreateRetVoid();
    b_.SetInsertPoint(none);
    b_.CreateRetVoid();
  }

  const DriverSpec& spec_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  std::unique_ptr<llvm::Module> m_;
  llvm::PointerType* ptr_ = nullptr;
  llvm::Type* i8_ = nullptr;
  llvm::Type* i32_ = nullptr;
  llvm::Type* i64_ = nullptr;
  llvm::StructType* ctx_ty_ = nullptr;
};

}  // namespace

uint64_t weights_hash(const std::vector<uint8_t>& bytes) {
  uint64_t h = kFnvOffset;
  for (uint8_t b : bytes) h = (h ^ b) * kFnvPrime;
  return h;
}

Artifact build_model_driver(const DriverSpec& spec, const Target& target) {
  check(spec);
  llvm::LLVMContext ctx;
  const std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(target, BuildOptions{});
  std::unique_ptr<llvm::Module> m = DriverWriter(spec, ctx, *tm).write();
  const std::string obj = emit_file(*m, *tm, llvm::CodeGenFileType::ObjectFile);
  Artifact a;
  a.object.assign(obj.begin(), obj.end());
  a.entry = spec.name + "_run";
  a.target = target.str();
  a.llvm_version = llvm_version();
  return a;
}

}  // namespace ktune::codegen
