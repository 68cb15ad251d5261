// Every form of weft/TensorMethods.inc that only forwards: the free functions of methods, the
// methods of free functions, other names, and in-place forms computed out of place.
#include "InPlace.h"
#include "weft/Functions.h"

namespace weft {

#undef WEFT_DEFAULT
#define WEFT_DEFAULT(...)

/// weft::fname(self, params): self.callee args.
#define WEFT_FREE_DEFINITION(fname, callee, params, args, ...)                                     \
  __VA_ARGS__ fname(const Tensor& self, WEFT_PARAMS params std::source_location loc) {             \
    CallSite cs(loc);                                                                              \
    return self.callee args;                                                                       \
  }
/// self.name_(params): self.name args written into self.
#define WEFT_IN_PLACE_DEFINITION(name, params, args)                                               \
  Tensor& Tensor::name##_(WEFT_PARAMS params std::source_location loc) {                           \
    CallSite cs(loc);                                                                              \
    return inPlaceOf(*this, #name "_",                                                             \
                     [&](const Tensor& x) { return x.name args; } WEFT_REST args);                 \
  }

#define WEFT_METHOD(name, params, args, forms, ...)                                                \
  WEFT_HAS_FUNCTION_##forms(WEFT_FREE_DEFINITION(name, name, params, args, __VA_ARGS__))           \
      WEFT_HAS_IN_PLACE_##forms(WEFT_IN_PLACE_DEFINITION(name, params, args))
#define WEFT_FUNCTION(name, params, args, forms, ...)                                              \
  __VA_ARGS__ Tensor::name(WEFT_PARAMS params std::source_location loc) const {                    \
    CallSite cs(loc);                                                                              \
    return weft::name(*this WEFT_REST args);                                                       \
  }                                                                                                \
  WEFT_HAS_IN_PLACE_##forms(WEFT_IN_PLACE_DEFINITION(name, params, args))
#define WEFT_ALIAS(alias, name, params, args, forms, ...)                                          \
  __VA_ARGS__ Tensor::alias(WEFT_PARAMS params std::source_location loc) const {                   \
    CallSite cs(loc);                                                                              \
    return name args;                                                                              \
  }                                                                                                \
  WEFT_HAS_FUNCTION_##forms(WEFT_FREE_DEFINITION(alias, name, params, args, __VA_ARGS__))          \
      WEFT_HAS_IN_PLACE_##forms(                                                                   \
          Tensor& Tensor::alias##_(WEFT_PARAMS params std::source_location loc) {                  \
            CallSite cs(loc);                                                                      \
            return name##_ args;                                                                   \
          })
#define WEFT_IN_PLACE WEFT_IN_PLACE_DEFINITION
#include "weft/TensorMethods.inc"

} // namespace weft
