// Transcendental functions in generated kernels, computed as the eager kernels compute them
// (weft/runtime/VectorMathFunctions.h): every call of a libm function of that list becomes a call
// of a small helper that computes its one element with libmvec's vector function, and the helper
// names that vector function as its vector variant, so LLVM's loop vectorizer calls it on whole
// vectors. Vectorized or not, each element goes through the same vector function.
#include "JitInternal.h"
#include "weft/runtime/VectorMathFunctions.h"

#include "llvm/IR/Attributes.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <string>
#include <vector>

namespace weft::codegen {
namespace {

bool hasFeature(const std::string& features, const std::string& f) {
  size_t at = 0;
  while ((at = features.find(f, at)) != std::string::npos) {
    size_t end = at + f.size();
    if ((at == 0 || features[at - 1] == ',') && (end == features.size() || features[end] == ','))
      return true;
    at = end;
  }
  return false;
}

/// Marks `f` as a pure function: no memory touched, no unwinding, always returns (what the
/// vectorizer needs to call it on vectors and what lets LLVM drop unused calls).
void markPure(llvm::Function& f) {
  f.setMemoryEffects(llvm::MemoryEffects::none());
  f.addFnAttr(llvm::Attribute::NoUnwind);
  f.addFnAttr(llvm::Attribute::WillReturn);
  f.addFnAttr(llvm::Attribute::NoFree);
  f.addFnAttr(llvm::Attribute::NoSync);
}

/// Replaces the calls of `scalar` (float(float) or double(double)) in `m` by calls of a helper
/// computing it with the `isa` form of width `width` (the one the runtime calls on the same CPU),
/// and names that form the helper's vector variant of that width. Narrower variants (half, a
/// quarter) repeat their lanes to fill it (zeros would be special inputs of log, taking its slow
/// path and raising a division-by-zero flag): whatever width LLVM vectorizes a loop with, each
/// element goes through the same vector function as eagerly.
void redirect(llvm::Module& m, const std::string& scalar, char isa, unsigned width) {
  llvm::Function* f = m.getFunction(scalar);
  if (f == nullptr || !f->isDeclaration() || f->arg_size() != 1 ||
      !f->getReturnType()->isFloatingPointTy() || f->getArg(0)->getType() != f->getReturnType())
    return;
  llvm::Type* t = f->getReturnType();
  auto* vt = llvm::FixedVectorType::get(t, width);
  auto mangled = [&](unsigned lanes, const std::string& name) {
    return std::string("_ZGV") + isa + "N" + std::to_string(lanes) + "v_" + name;
  };
  std::string vectorName = mangled(width, scalar);
  llvm::FunctionCallee vector =
      m.getOrInsertFunction(vectorName, llvm::FunctionType::get(vt, {vt}, false));
  markPure(*llvm::cast<llvm::Function>(vector.getCallee()));

  std::string helperName = "weft_vm_" + scalar;
  llvm::Function* helper = llvm::Function::Create(
      f->getFunctionType(), llvm::GlobalValue::InternalLinkage, helperName, m);
  markPure(*helper);
  helper->addFnAttr(llvm::Attribute::NoInline); // stays a call the vectorizer can widen
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", helper));
  llvm::Value* lanes = b.CreateCall(vector, {b.CreateVectorSplat(width, helper->getArg(0))});
  b.CreateRet(b.CreateExtractElement(lanes, uint64_t{0}));

  std::string variants = mangled(width, helperName) + "(" + vectorName + ")";
  std::vector<llvm::GlobalValue*> padded;
  for (unsigned narrow = width / 2; narrow >= 2 && narrow * 4 >= width; narrow /= 2) {
    auto* nt = llvm::FixedVectorType::get(t, narrow);
    std::string name = helperName + "_x" + std::to_string(narrow);
    llvm::Function* pad = llvm::Function::Create(llvm::FunctionType::get(nt, {nt}, false),
                                                 llvm::GlobalValue::InternalLinkage, name, m);
    markPure(*pad);
    llvm::IRBuilder<> pb(llvm::BasicBlock::Create(m.getContext(), "entry", pad));
    std::vector<int> widen(width), keep(narrow);
    for (unsigned i = 0; i < width; ++i)
      widen[i] = static_cast<int>(i % narrow); // the lanes again: no input a form treats apart
    for (unsigned i = 0; i < narrow; ++i)
      keep[i] = static_cast<int>(i);
    llvm::Value* wide = pb.CreateShuffleVector(pad->getArg(0), pad->getArg(0), widen);
    pb.CreateRet(pb.CreateShuffleVector(pb.CreateCall(vector, {wide}), keep));
    variants += "," + mangled(narrow, helperName) + "(" + name + ")";
    padded.push_back(pad);
  }
  // Named only in the attribute below until the vectorizer calls them: kept until then.
  if (!padded.empty()) llvm::appendToCompilerUsed(m, padded);

  std::vector<llvm::CallInst*> calls;
  for (llvm::User* u : f->users())
    if (auto* call = llvm::dyn_cast<llvm::CallInst>(u); call && call->getCalledFunction() == f)
      calls.push_back(call);
  for (llvm::CallInst* call : calls) {
    call->setCalledFunction(helper);
    call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant", variants));
  }
}

} // namespace

void useVectorMath(llvm::Module& m, const CpuTarget& target) {
  if (target.triple.rfind("x86_64", 0) != 0) return; // libm's scalar functions elsewhere
  // As the runtime chooses for the eager kernels (VectorMath.cpp): AVX-512, else AVX2 with FMA,
  // else SSE2.
  const bool avx512 = hasFeature(target.features, "+avx512f");
  const bool avx2 = hasFeature(target.features, "+avx2") && hasFeature(target.features, "+fma");
  const char isa = avx512 ? 'e' : avx2 ? 'd' : 'b';
  const unsigned floats = avx512 ? 16 : avx2 ? 8 : 4;
  if (avx512) // LLVM prefers 256-bit vectors on some AVX-512 CPUs: the calls would pad to 512
    for (llvm::Function& fn : m)
      if (!fn.isDeclaration()) fn.addFnAttr("prefer-vector-width", "512");
#define WEFT_REDIRECT(op, name)                                                                    \
  redirect(m, #name "f", isa, floats);                                                             \
  redirect(m, #name, isa, floats / 2);
  WEFT_VECTOR_MATH_FUNCTIONS(WEFT_REDIRECT)
#undef WEFT_REDIRECT
}

} // namespace weft::codegen
