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
/// computing it with the `isa` form of width `width`.
void redirect(llvm::Module& m, const std::string& scalar, char isa, unsigned width) {
  llvm::Function* f = m.getFunction(scalar);
  if (f == nullptr || !f->isDeclaration() || f->arg_size() != 1 ||
      !f->getReturnType()->isFloatingPointTy() || f->getArg(0)->getType() != f->getReturnType())
    return;
  llvm::Type* t = f->getReturnType();
  auto* vt = llvm::FixedVectorType::get(t, width);
  std::string shape = std::string("_ZGV") + isa + "N" + std::to_string(width) + "v_";
  std::string vectorName = shape + scalar;
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

  std::string variant = shape + helperName + "(" + vectorName + ")";
  std::vector<llvm::CallInst*> calls;
  for (llvm::User* u : f->users())
    if (auto* call = llvm::dyn_cast<llvm::CallInst>(u); call && call->getCalledFunction() == f)
      calls.push_back(call);
  for (llvm::CallInst* call : calls) {
    call->setCalledFunction(helper);
    call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant", variant));
  }
}

} // namespace

void useVectorMath(llvm::Module& m, const CpuTarget& target) {
  if (target.triple.rfind("x86_64", 0) != 0) return; // libm's scalar functions elsewhere
  // As the runtime chooses for the eager kernels (VectorMath.cpp): AVX2 with FMA, else SSE2.
  bool avx2 = hasFeature(target.features, "+avx2") && hasFeature(target.features, "+fma");
  char isa = avx2 ? 'd' : 'b';
  unsigned floats = avx2 ? 8 : 4;
#define WEFT_REDIRECT(op, name)                                                                    \
  redirect(m, #name "f", isa, floats);                                                             \
  redirect(m, #name, isa, floats / 2);
  WEFT_VECTOR_MATH_FUNCTIONS(WEFT_REDIRECT)
#undef WEFT_REDIRECT
}

} // namespace weft::codegen
