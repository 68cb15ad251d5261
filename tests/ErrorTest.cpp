// User mistakes: each one throws the right weft::Error subclass with a message that names the op,
// the shapes or dtypes involved, and the caller's line. None may abort the process.
#include "TestUtil.h"

#include <functional>
#include <string>

namespace weft::test {
namespace {

using namespace weft::indexing;

struct Mistake {
  const char* name;
  std::function<void()> call;
  ErrorKind kind;
  std::vector<std::string> mentions; // substrings the message must contain
  bool namedCall = true;             // operators and accessors take no source location
};

std::vector<Mistake> mistakes() {
  Tensor m23 = ones({2, 3}), m45 = ones({4, 5}), v3 = ones({3}), i64 = ones({3}, kInt64);
  return {
      {"add of unbroadcastable shapes",
       [=] { (void)(m23 + m45); },
       ErrorKind::Shape,
       {"add", "[2, 3]", "[4, 5]", "broadcast"},
       false},
      {"mul of unbroadcastable shapes",
       [=] { (void)(m23 * ones({2})); },
       ErrorKind::Shape,
       {"mul", "[2, 3]", "[2]"},
       false},
      {"a tensor on a device this process lacks",
       [] {
         (void)zeros({2}, TensorOptions().device({DeviceType::Null, 7}));
       },
       ErrorKind::Device,
       {"null:7", "null:0 to null:3"}},
      {"a tensor on a CPU index other than 0",
       [] {
         (void)ones({2}, TensorOptions().device({DeviceType::CPU, 3}));
       },
       ErrorKind::Device,
       {"cpu:3"}},
      {"matmul inner dims differ",
       [=] { (void)m23.matmul(m45); },
       ErrorKind::Shape,
       {"matmul", "2x3", "4x5"}},
      {"matmul of a 0-d tensor",
       [=] { (void)matmul(scalar_tensor(1.0), v3); },
       ErrorKind::Shape,
       {"matmul", "at least 1D"}},
      {"matmul dtype mismatch",
       [=] {
         (void)m23.matmul(ones({3, 2}, kFloat64));
       },
       ErrorKind::DType,
       {"matmul", "float32", "float64"}},
      {"mm of 3-d tensors",
       [=] {
         (void)ones({2, 2, 2}).mm(ones({2, 2}));
       },
       ErrorKind::Shape,
       {"mm", "2-D"}},
      {"bmm batch mismatch",
       [=] {
         (void)ones({2, 2, 3}).bmm(ones({3, 3, 2}));
       },
       ErrorKind::Shape,
       {"bmm", "batch"}},
      {"view of impossible size",
       [=] { (void)m23.view({4}); },
       ErrorKind::Shape,
       {"view", "[4]", "6"}},
      {"view of non-contiguous",
       [=] { (void)m23.t().view({6}); },
       ErrorKind::Shape,
       {"view", "reshape"}},
      {"reshape two -1",
       [=] {
         (void)m23.reshape({-1, -1});
       },
       ErrorKind::Value,
       {"reshape", "only one dimension"}},
      {"reshape wrong count",
       [=] { (void)m23.reshape({5}); },
       ErrorKind::Shape,
       {"reshape", "[5]", "[2, 3]"}},
      {"dim out of range",
       [=] { (void)m23.sum({2}); },
       ErrorKind::Index,
       {"sum", "dimension out of range", "2"}},
      {"negative dim out of range",
       [=] { (void)m23.softmax(-3); },
       ErrorKind::Index,
       {"softmax", "-3"}},
      {"repeated reduction dim",
       [=] {
         (void)m23.sum({1, -1});
       },
       ErrorKind::Value,
       {"sum", "more than once"}},
      {"permute with a repeated dim",
       [=] {
         (void)m23.permute({0, 0});
       },
       ErrorKind::Value,
       {"permute", "repeats"}},
      {"permute with too few dims",
       [=] { (void)m23.permute({0}); },
       ErrorKind::Shape,
       {"permute", "rank 2"}},
      {"expand to incompatible size",
       [=] {
         (void)m23.expand({4, 3, 4});
       },
       ErrorKind::Shape,
       {"expand", "[2, 3]", "[4, 3, 4]"}},
      {"expand to fewer dims",
       [=] { (void)m23.expand({3}); },
       ErrorKind::Shape,
       {"expand", "number of sizes"}},
      {"select index out of range",
       [=] { (void)m23.select(0, 5); },
       ErrorKind::Index,
       {"select", "5", "[2, 3]"}},
      {"narrow past the end",
       [=] { (void)m23.narrow(1, 2, 2); },
       ErrorKind::Index,
       {"narrow", "exceeds"}},
      {"slice with a zero step",
       [=] { (void)m23.slice(1, 0, 2, 0); },
       ErrorKind::Value,
       {"slice", "step"}},
      {"index too many indices",
       [=] {
         (void)m23.index({0, 0, 0});
       },
       ErrorKind::Index,
       {"too many indices"}},
      {"index two ellipses",
       [=] {
         (void)m23.index({Ellipsis, Ellipsis});
       },
       ErrorKind::Index,
       {"single ellipsis"}},
      {"index tensor out of bounds",
       [=] {
         (void)m23.index({tensor({0, 7})});
       },
       ErrorKind::Index,
       {"7", "out of bounds", "size 2"}},
      {"index with a float tensor",
       [=] { (void)m23.index({ones({2})}); },
       ErrorKind::Index,
       {"long, int, byte or bool", "float32"}},
      {"mask of the wrong shape",
       [=] { (void)m23.index({ones({3}, kBool)}); },
       ErrorKind::Index,
       {"mask", "[3]", "[2, 3]"}},
      {"bad string index", [=] { (void)m23.index({"x"}); }, ErrorKind::Value, {"\"...\""}},
      {"gather index out of range",
       [=] {
         (void)m23.gather(1, full({2, 1}, 9, kInt64));
       },
       ErrorKind::Index,
       {"index 9", "size 3"}},
      {"gather with int32 index",
       [=] {
         (void)m23.gather(1, zeros({2, 1}, kInt32));
       },
       ErrorKind::DType,
       {"gather", "int64", "int32"}},
      {"scatter_add dtype mismatch",
       [=] {
         (void)m23.scatter_add(0, zeros({1, 3}, kInt64), ones({1, 3}, kFloat64));
       },
       ErrorKind::DType,
       {"scatter_add", "float32", "float64"}},
      {"index_select 2-d index",
       [=] {
         (void)m23.index_select(0, zeros({2, 2}, kInt64));
       },
       ErrorKind::Shape,
       {"index_select", "1-D"}},
      {"embedding with float indices",
       [=] { (void)embedding(m23, ones({2})); },
       ErrorKind::DType,
       {"embedding", "float32"}},
      {"one_hot class too large",
       [=] {
         (void)one_hot(tensor({0, 5}), 3);
       },
       ErrorKind::Index,
       {"one_hot", "index 5", "size 3"}},
      {"conv2d channel mismatch",
       [=] {
         (void)conv2d(ones({1, 3, 8, 8}), ones({4, 2, 3, 3}));
       },
       ErrorKind::Shape,
       {"conv", "3 channels", "[4, 2, 3, 3]"}},
      {"conv2d kernel larger than input",
       [=] {
         (void)conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3}));
       },
       ErrorKind::Shape,
       {"conv", "larger than the padded input"}},
      {"conv2d on integers",
       [=] {
         (void)conv2d(ones({1, 1, 4, 4}, kInt64), ones({1, 1, 3, 3}, kInt64));
       },
       ErrorKind::DType,
       {"conv", "floating-point", "int64"}},
      {"conv2d groups do not divide",
       [=] {
         (void)conv2d(ones({1, 4, 4, 4}), ones({3, 2, 1, 1}), {}, {1}, {0}, {1}, 2);
       },
       ErrorKind::Value,
       {"groups=2"}},
      {"conv2d bad stride list",
       [=] {
         (void)conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, {1, 1, 1});
       },
       ErrorKind::Value,
       {"conv2d", "stride"}},
      {"conv2d bias size",
       [=] {
         (void)conv2d(ones({1, 1, 4, 4}), ones({2, 1, 3, 3}), ones({3}));
       },
       ErrorKind::Shape,
       {"conv2d", "bias", "2 output channels"}},
      {"conv_transpose output padding too big",
       [=] {
         (void)conv_transpose2d(ones({1, 1, 3, 3}), ones({1, 1, 3, 3}), {}, {1}, {0}, {2});
       },
       ErrorKind::Value,
       {"output padding"}},
      {"max_pool2d on 2-d input",
       [=] {
         (void)max_pool2d(ones({4, 4}), {2});
       },
       ErrorKind::Shape,
       {"max_pool_argmax", "[4, 4]"}},
      {"max_pool2d padding too large",
       [=] {
         (void)max_pool2d(ones({1, 1, 4, 4}), {2}, {}, {2});
       },
       ErrorKind::Value,
       {"padding", "half"}},
      {"cat of mismatched shapes",
       [=] {
         (void)cat({m23, ones({2, 4})}, 0);
       },
       ErrorKind::Shape,
       {"cat", "[2, 4]", "[2, 3]"}},
      {"cat of an empty list", [] { (void)cat({}); }, ErrorKind::Value, {"cat", "non-empty"}},
      {"stack of unequal tensors",
       [=] {
         (void)stack({m23, v3});
       },
       ErrorKind::Shape,
       {"stack", "equal size"}},
      {"split sizes do not add up",
       [=] {
         (void)split(m23, std::vector<int64_t>{1, 1}, 1);
       },
       ErrorKind::Shape,
       {"split", "sum to 2", "size 3"}},
      {"pad with an odd length",
       [=] { (void)pad(m23, {1}); },
       ErrorKind::Value,
       {"pad", "divisible by 2"}},
      {"pad that crops below zero",
       [=] {
         (void)pad(m23, {-2, -2});
       },
       ErrorKind::Shape,
       {"pad", "negative"}},
      {"item of a multi-element tensor",
       [=] { (void)m23.item<float>(); },
       ErrorKind::Value,
       {"item", "6 elements"}},
      {"data_ptr of the wrong type",
       [=] { (void)m23.data_ptr<double>(); },
       ErrorKind::DType,
       {"data_ptr", "float32", "float64"}},
      {"mean of integers", [=] { (void)i64.mean(); }, ErrorKind::DType, {"mean", "int64"}},
      {"neg of bools", [] { (void)(-ones({2}, kBool)); }, ErrorKind::DType, {"neg", "bool"}, false},
      {"sub of bools",
       [] { (void)(ones({2}, kBool) - ones({2}, kBool)); },
       ErrorKind::DType,
       {"sub", "bool", "logical_xor"},
       false},
      {"where with a float condition",
       [=] { (void)where(v3, v3, v3); },
       ErrorKind::DType,
       {"where", "bool", "float32"}},
      {"masked_fill with a float mask",
       [=] { (void)m23.masked_fill(m23, 0); },
       ErrorKind::DType,
       {"masked_fill", "bool mask"}},
      {"in-place result does not fit",
       [=] {
         Tensor a = ones({3});
         a.add_(m23);
       },
       ErrorKind::Shape,
       {"add_", "[3]", "[2, 3]"}},
      {"in-place float into int",
       [=] {
         Tensor a = zeros({3}, kInt64);
         a.add_(ones({3}));
       },
       ErrorKind::DType,
       {"add_", "float32", "int64"}},
      {"in-place on a leaf requiring grad",
       [] {
         Tensor a = ones({2}).requires_grad_();
         a.mul_(2);
       },
       ErrorKind::Value,
       {"mul_", "leaf Variable"}},
      {"requires_grad on integers",
       [] {
         Tensor a = ones({2}, kInt64);
         a.requires_grad_();
       },
       ErrorKind::DType,
       {"requires_grad_", "int64"}},
      {"backward without grad",
       [=] { v3.sum().backward(); },
       ErrorKind::Value,
       {"does not require grad"}},
      {"backward of a non-scalar",
       [] { (ones({2}).requires_grad_() * 2).backward(); },
       ErrorKind::Value,
       {"scalar outputs", "[2]"}},
      {"backward gradient of the wrong shape",
       [] { (ones({2}).requires_grad_() * 2).backward(ones({3})); },
       ErrorKind::Shape,
       {"grad_output[0]", "[3]", "[2]"}},
      {"hook on a tensor without grad",
       [=] { v3.register_hook([](const Tensor& g) { return g; }); },
       ErrorKind::Value,
       {"register_hook"}},
      {"grad of an input that does not require grad",
       [=] {
         Tensor x = ones({1}).requires_grad_();
         (void)autograd::grad({(x * 2).sum()}, {v3});
       },
       ErrorKind::Value,
       {"grad", "does not require grad"}},
      {"operation on an undefined tensor",
       [] {
         Tensor u;
         (void)u.exp();
       },
       ErrorKind::Value,
       {"exp", "undefined"}},
      {"sizes of an undefined tensor",
       [] {
         Tensor u;
         (void)u.sizes();
       },
       ErrorKind::Value,
       {"sizes", "undefined"},
       false},
      {"negative factory size",
       [] {
         (void)zeros({2, -1});
       },
       ErrorKind::Shape,
       {"zeros", "-1"}},
      {"arange with a zero step",
       [] { (void)arange(0, 5, 0); },
       ErrorKind::Value,
       {"arange", "step"}},
      {"arange with the wrong sign",
       [] { (void)arange(5, 0, 1); },
       ErrorKind::Value,
       {"arange", "sign"}},
      {"randint with low >= high",
       [] { (void)randint(3, 3, {2}); },
       ErrorKind::Value,
       {"randint", "low < high"}},
      {"bernoulli p out of range",
       [] { (void)bernoulli({2}, 1.5); },
       ErrorKind::Value,
       {"bernoulli", "1.5"}},
      {"from_vector count mismatch",
       [] {
         (void)from_vector(std::vector<float>{1, 2, 3}, {2, 2});
       },
       ErrorKind::Shape,
       {"from_vector", "3 values", "[2, 2]"}},
      {"topk k too large", [=] { (void)v3.topk(4); }, ErrorKind::Index, {"topk", "k (4)"}},
      {"max of an empty tensor",
       [] { (void)zeros({0}).max(); },
       ErrorKind::Value,
       {"max", "numel() == 0"}},
      {"argmax of an empty dim",
       [] {
         (void)zeros({2, 0}).argmax(1);
       },
       ErrorKind::Value,
       {"argmax", "empty"}},
      {"t of a 3-d tensor",
       [] {
         (void)ones({2, 2, 2}).t();
       },
       ErrorKind::Shape,
       {"t", "<= 2 dimensions"}},
      {"clamp without bounds",
       [=] { (void)v3.clamp(std::nullopt, std::nullopt); },
       ErrorKind::Value,
       {"clamp", "at least one"}},
      {"copy_ of an unbroadcastable source",
       [=] {
         Tensor a = ones({3});
         a.copy_(ones({2}));
       },
       ErrorKind::Shape,
       {"copy_", "[2]", "[3]"}},
  };
}

TEST(Errors, AtLeastFortyDistinctMistakes) {
  EXPECT_GE(mistakes().size(), 40u);
}

TEST(Errors, EachMistakeThrowsTheRightErrorWithAClearMessage) {
  for (const Mistake& m : mistakes()) {
    SCOPED_TRACE(m.name);
    try {
      m.call();
      ADD_FAILURE() << m.name << ": no error was thrown";
    } catch (const Error& e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(m.kind)) << e.what();
      std::string what = e.what();
      for (const std::string& s : m.mentions)
        EXPECT_NE(what.find(s), std::string::npos) << "message lacks '" << s << "': " << what;
      // The caller's line is named: every mistake above is made from this file.
      if (m.namedCall) {
        EXPECT_NE(what.find("ErrorTest.cpp:"), std::string::npos) << "no call site: " << what;
      }
      EXPECT_EQ(what.find("internal error"), std::string::npos) << what;
    }
  }
}

TEST(Errors, ErrorClassesDeriveFromWeftError) {
  EXPECT_THROW((void)(ones({2}) + ones({3})), ShapeError);
  EXPECT_THROW((void)(ones({2}) + ones({3})), Error);
  EXPECT_THROW((void)ones({2}).sum({5}), IndexError);
  EXPECT_THROW((void)ones({2}, kInt64).mean(), DTypeError);
}

TEST(Errors, CallSiteIsTheOutermostUserCall) {
  // softmax calls amax, exp and sum inside: the line named is still the user's.
  const int line = __LINE__ + 2;
  try {
    (void)ones({2}).softmax(3);
    FAIL();
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("ErrorTest.cpp:" + std::to_string(line)), std::string::npos) << what;
  }
}

TEST(Errors, ErrorsInsideThreadPoolChunksReachTheCaller) {
  // An out-of-range index found by a kernel running on pool threads is rethrown on this thread.
  Tensor big = zeros({100000});
  Tensor idx = zeros({100000}, kInt64);
  idx.index_put_({99999}, int64_t{100000});
  EXPECT_THROW((void)big.gather(0, idx), IndexError);
}

} // namespace
} // namespace weft::test
