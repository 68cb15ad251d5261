// Which indices each index-taking op accepts, against PyTorch 1.13's answers kept in
// tests/reference/index_bounds.txt: where PyTorch raises, weft raises an IndexError naming the
// op, the index and the size it is out of bounds for, eagerly and compiled alike; where PyTorch
// takes an index (negative ones wrapped where it wraps them), weft gives PyTorch's values. Also
// index_put_'s accumulate, and bad indices found on the thread pool.
#include "TestUtil.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace weft::test {
namespace {

namespace F = nn::functional;

/// PyTorch's answer for one case: that it raised, or its result.
struct Expected {
  bool error = false;
  Shape shape;
  std::vector<double> values;
};

/// index_bounds.txt by "name|index".
const std::map<std::string, Expected>& expectations() {
  static const std::map<std::string, Expected> all = [] {
    std::map<std::string, Expected> m;
    std::ifstream in(WEFT_INDEX_BOUNDS);
    EXPECT_TRUE(in.good()) << "cannot read " << WEFT_INDEX_BOUNDS;
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = splitOn(line, '|');
      Expected e{f.at(2) == "error", {}, {}};
      if (!e.error) {
        for (const std::string& d : splitOn(f.at(3), ','))
          if (!d.empty()) e.shape.push_back(std::stoll(d));
        for (const std::string& v : splitOn(f.at(4), ','))
          if (!v.empty()) e.values.push_back(std::stod(v));
      }
      m[f.at(0) + "|" + f.at(1)] = e;
    }
    return m;
  }();
  return all;
}

Tensor x23() {
  return arange(6).to(kFloat64).reshape({2, 3});
}
Tensor src21() {
  return from_vector(std::vector<double>{10, 20}, {2, 1});
}
/// [[i], [i]]: one index per row of x23, into dim 1.
Tensor col(int64_t i) {
  return full({2, 1}, i, kInt64);
}
Tensor vec(int64_t i) {
  return from_vector(std::vector<int64_t>{i}, {1});
}
Tensor e(Shape shape) {
  return zeros(shape, kFloat64);
}

/// One row of the table: `call(self(), index(i))` computes what index_bounds.py's case `name`
/// does. Where PyTorch raises, weft raises `kind`; an IndexError's message names `op` and says
/// the index is out of bounds for `size` (elements where `flat`).
struct Case {
  std::string name;
  std::string op;
  int64_t size;
  bool flat;
  std::function<Tensor()> self;
  std::function<Tensor(int64_t)> index;
  std::function<Tensor(const Tensor&, const Tensor&)> call;
  ErrorKind kind = ErrorKind::Index;
};

using Call = std::function<Tensor(const Tensor&, const Tensor&)>;

Case dimCase(std::string name, std::string op, Call call, std::function<Tensor(int64_t)> index) {
  return {std::move(name), std::move(op), 3, false, x23, std::move(index), std::move(call)};
}

/// The ops indexing dim 1 of x23 (size 3), tried with -4, -3, -1, 0, 2 and 3.
std::vector<Case> dimCases() {
  auto scatterReduce = [](std::string how) {
    return [how](const Tensor& x, const Tensor& i) { return x.scatter_reduce(1, i, src21(), how); };
  };
  auto indexReduce = [](std::string how) {
    return [how](const Tensor& x, const Tensor& i) { return x.index_reduce(1, i, src21(), how); };
  };
  std::vector<Case> cases{
      dimCase(
          "gather", "gather", [](const Tensor& x, const Tensor& i) { return x.gather(1, i); }, col),
      dimCase(
          "scatter", "scatter",
          [](const Tensor& x, const Tensor& i) { return x.scatter(1, i, src21()); }, col),
      dimCase(
          "scatter_add", "scatter_add",
          [](const Tensor& x, const Tensor& i) { return x.scatter_add(1, i, src21()); }, col),
      dimCase("scatter_reduce_sum", "scatter_reduce", scatterReduce("sum"), col),
      dimCase("scatter_reduce_prod", "scatter_reduce", scatterReduce("prod"), col),
      dimCase("scatter_reduce_mean", "scatter_reduce", scatterReduce("mean"), col),
      dimCase("scatter_reduce_amax", "scatter_reduce", scatterReduce("amax"), col),
      dimCase("scatter_reduce_amin", "scatter_reduce", scatterReduce("amin"), col),
      dimCase(
          "index_select", "index_select",
          [](const Tensor& x, const Tensor& i) { return x.index_select(1, i); }, vec),
      dimCase(
          "index_add", "index_add",
          [](const Tensor& x, const Tensor& i) { return x.index_add(1, i, src21()); }, vec),
      dimCase(
          "index_copy", "index_copy",
          [](const Tensor& x, const Tensor& i) { return x.index_copy(1, i, src21()); }, vec),
      dimCase(
          "index_fill", "index_fill",
          [](const Tensor& x, const Tensor& i) { return x.index_fill(1, i, 7.0); }, vec),
      dimCase("index_reduce_prod", "index_reduce", indexReduce("prod"), vec),
      dimCase("index_reduce_mean", "index_reduce", indexReduce("mean"), vec),
      dimCase("index_reduce_amax", "index_reduce", indexReduce("amax"), vec),
      dimCase("index_reduce_amin", "index_reduce", indexReduce("amin"), vec),
      dimCase(
          "take_along_dim", "take_along_dim",
          [](const Tensor& x, const Tensor& i) { return x.take_along_dim(i, 1); }, col),
      dimCase(
          "index", "index",
          [](const Tensor& x, const Tensor& i) {
            return x.index({indexing::Slice(), i});
          },
          vec),
      dimCase(
          "index_put", "index_put_",
          [](const Tensor& x, const Tensor& i) {
            return x.index_put({vec(0), i}, scalar_tensor(10.0, kFloat64));
          },
          vec),
      dimCase(
          "index_put_accumulate", "index_put_",
          [](const Tensor& x, const Tensor& i) {
            return x.index_put({vec(0), i}, scalar_tensor(10.0, kFloat64), true);
          },
          vec),
      dimCase(
          "embedding", "embedding",
          [](const Tensor& x, const Tensor& i) { return embedding(x.t().contiguous(), i); }, vec),
      dimCase(
          "one_hot", "one_hot", [](const Tensor&, const Tensor& i) { return one_hot(i, 3); }, vec),
      // The losses check their targets (ignore_index aside): errors name them.
      dimCase(
          "nll_loss", "nll_loss",
          [](const Tensor& x, const Tensor& i) {
            return F::nll_loss(x, cat({i, vec(0)}));
          },
          vec),
      dimCase(
          "cross_entropy", "cross_entropy",
          [](const Tensor& x, const Tensor& i) {
            return F::cross_entropy(x, cat({i, vec(0)}));
          },
          vec),
  };
  // bincount's output grows with its largest value; a negative one is PyTorch's RuntimeError
  // "non-negative" (a ValueError), not an index out of bounds.
  Case bincount = dimCase(
      "bincount", "bincount", [](const Tensor&, const Tensor& i) { return i.bincount(); }, vec);
  bincount.kind = ErrorKind::Value;
  cases.push_back(bincount);
  return cases;
}

/// The ops indexing x23 as a flat tensor of 6 elements, tried with -7, -6, -1, 0, 5 and 6.
std::vector<Case> flatCases() {
  auto flat = [](std::string name, std::string op, bool elements, Call call) {
    return Case{std::move(name), std::move(op), 6, elements, x23, vec, std::move(call)};
  };
  Tensor ten = from_vector(std::vector<double>{10});
  return {
      flat("take", "take", true, [](const Tensor& x, const Tensor& i) { return x.take(i); }),
      // As PyTorch's take_along_dim: dimension 0 of the flattened tensor.
      flat("take_along_dim_flat", "take_along_dim", false,
           [](const Tensor& x, const Tensor& i) { return x.take_along_dim(i); }),
      flat("put", "put", true, [ten](const Tensor& x, const Tensor& i) { return x.put(i, ten); }),
      flat("put_accumulate", "put", true,
           [ten](const Tensor& x, const Tensor& i) { return x.put(i, ten, true); }),
  };
}

/// Empty tensors, empty dims and 0-d tensors, each with the one index `value` (index_bounds.py's
/// cases named "...|-"); `size` is the size it is out of bounds for where PyTorch raises.
struct Special {
  Case c;
  int64_t value;
};

std::vector<Special> specialCases() {
  auto special = [](std::string name, std::string op, int64_t size, int64_t value, Tensor self,
                    Tensor index, Call call, bool flat = false) {
    return Special{Case{std::move(name), std::move(op), size, flat, [self] { return self; },
                        [index](int64_t) { return index; }, std::move(call)},
                   value};
  };
  Tensor c0 = col(0), c1 = col(-1), v5 = vec(5), v0 = vec(0), v1 = vec(-1);
  Tensor s = scalar_tensor(5.0, kFloat64);
  auto gather = [](const Tensor& x, const Tensor& i) { return x.gather(1, i); };
  auto select1 = [](const Tensor& x, const Tensor& i) { return x.index_select(1, i); };
  return {
      special("gather_into_empty_dim", "gather", 0, 0, e({2, 0}), c0, gather),
      // The case: scatter into an empty dim returned an empty tensor.
      special("scatter_into_empty_dim", "scatter", 0, 0, e({2, 0}), c0,
              [](const Tensor& x, const Tensor& i) { return x.scatter(1, i, src21()); }),
      special("scatter_add_into_empty_dim", "scatter_add", 0, 0, e({2, 0}), c0,
              [](const Tensor& x, const Tensor& i) { return x.scatter_add(1, i, src21()); }),
      special(
          "scatter_reduce_into_empty_dim", "scatter_reduce", 0, -1, e({2, 0}), c1,
          [](const Tensor& x, const Tensor& i) { return x.scatter_reduce(1, i, src21(), "amax"); }),
      special("gather_empty_index", "gather", 3, 0, x23(), zeros({2, 0}, kInt64), gather),
      special("index_select_empty_rows", "index_select", 3, 5, e({0, 3}), v5, select1),
      special("index_select_empty_dim", "index_select", 0, 0, e({2, 0}), v0, select1),
      special("index_select_empty_index", "index_select", 0, 0, e({2, 0}), zeros({0}, kInt64),
              select1),
      special("index_add_empty_rows", "index_add", 3, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) {
                return x.index_add(1, i, e({0, 1}));
              }),
      special("index_copy_empty_rows", "index_copy", 3, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) {
                return x.index_copy(1, i, e({0, 1}));
              }),
      special("index_fill_empty_rows", "index_fill", 3, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) { return x.index_fill(1, i, 1.0); }),
      // PyTorch fails here inside its kernel ("setStorage: ... out of bounds"), not on the index.
      special("index_fill_empty_dim", "index_fill", 0, 0, e({2, 0}), v0,
              [](const Tensor& x, const Tensor& i) { return x.index_fill(1, i, 1.0); }),
      special("index_reduce_empty_rows", "index_reduce", 3, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) {
                return x.index_reduce(1, i, e({0, 1}), "amax");
              }),
      special("index_empty_rows", "index", 3, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) {
                return x.index({indexing::Slice(), i});
              }),
      special("index_empty_dim", "index", 0, 0, e({0, 3}), v0,
              [](const Tensor& x, const Tensor& i) { return x.index({i}); }),
      special("index_put_empty_rows", "index_put_", 3, 5, e({3, 0}), v5,
              [](const Tensor& x, const Tensor& i) {
                return x.index_put({i}, e({1, 0}));
              }),
      special(
          "take_from_empty", "take", 0, 0, e({2, 0}), v0,
          [](const Tensor& x, const Tensor& i) { return x.take(i); }, true),
      special(
          "put_into_empty", "put", 0, 0, e({2, 0}), v0,
          [](const Tensor& x, const Tensor& i) { return x.put(i, ones({1}, kFloat64)); }, true),
      special("embedding_empty_weight", "embedding", 3, 5, e({3, 0}), v5,
              [](const Tensor& w, const Tensor& i) { return embedding(w, i); }),
      special("take_along_dim_flat_empty", "take_along_dim", 0, 5, e({0, 3}), v5,
              [](const Tensor& x, const Tensor& i) { return x.take_along_dim(i); }),
      special("one_hot_no_indices", "one_hot", 3, 0, e({0}), zeros({0}, kInt64),
              [](const Tensor&, const Tensor& i) { return one_hot(i, 3); }),
      special("scalar_gather_negative", "gather", 1, -1, s, v1,
              [](const Tensor& x, const Tensor& i) { return x.gather(0, i); }),
      special("scalar_index_select_negative", "index_select", 1, -1, s, v1,
              [](const Tensor& x, const Tensor& i) { return x.index_select(0, i); }),
      special("scalar_index_fill_negative", "index_fill", 1, -1, s, v1,
              [](const Tensor& x, const Tensor& i) { return x.index_fill(0, i, 1.0); }),
      special(
          "scalar_take_negative", "take", 1, -1, s, v1,
          [](const Tensor& x, const Tensor& i) { return x.take(i); }, true),
  };
}

/// The message without its " (called from ...)" tail, which only an eager call has.
std::string withoutCallSite(const std::string& what) {
  return what.substr(0, what.find(" (called from"));
}

/// Checks one case at index `i` against PyTorch's answer under `key`, eagerly, and compiled by
/// `compiled` (which runs `c.call` compiled) where given: the same values, or the same error.
void checkCase(const Case& c, int64_t i, const std::string& key,
               const std::function<Tensor(const Tensor&, const Tensor&)>& compiled) {
  SCOPED_TRACE(key);
  auto found = expectations().find(key);
  ASSERT_NE(found, expectations().end()) << key << " is not in index_bounds.txt";
  const Expected& want = found->second;
  Tensor self = c.self(), index = c.index(i);
  if (!want.error) {
    Tensor got = c.call(self, index);
    EXPECT_EQ(got.sizes(), want.shape);
    EXPECT_TRUE(allClose(got.to_vector<double>(), want.values, 1e-12, 1e-12));
    if (compiled) {
      EXPECT_TRUE(allClose(compiled(self, index), got, 0, 0));
    }
    return;
  }
  std::string eager;
  try {
    (void)c.call(self, index);
    ADD_FAILURE() << "no error (PyTorch raises)";
    return;
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), c.kind) << err.what();
    eager = err.what();
  }
  if (c.kind == ErrorKind::Index) {
    const std::string bound = c.flat ? " is out of bounds for a tensor of " + std::to_string(c.size)
                                     : " with size " + std::to_string(c.size);
    EXPECT_NE(eager.find(c.op + ": index " + std::to_string(i) + " is out of bounds"),
              std::string::npos)
        << eager;
    EXPECT_NE(eager.find(bound), std::string::npos) << eager;
  } else {
    EXPECT_NE(eager.find(c.op), std::string::npos) << eager;
  }
  if (!compiled) return;
  try {
    (void)compiled(self, index);
    ADD_FAILURE() << "compiled: no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), c.kind) << err.what();
    EXPECT_EQ(withoutCallSite(err.what()), withoutCallSite(eager));
  }
}

/// `c.call` compiled: one signature, so one compilation serves every index tried.
std::function<Tensor(const Tensor&, const Tensor&)> compiledCall(const Case& c) {
  auto f = std::make_shared<CompiledFn<Tensor(const Tensor&, const Tensor&)>>(compile(c.call));
  return [f](const Tensor& x, const Tensor& i) { return (*f)(x, i); };
}

TEST(IndexBounds, EveryOpAcceptsTheIndicesPyTorchAccepts) {
  for (const Case& c : dimCases())
    for (int64_t i : {-4, -3, -1, 0, 2, 3})
      checkCase(c, i, c.name + "|" + std::to_string(i), {});
  for (const Case& c : flatCases())
    for (int64_t i : {-7, -6, -1, 0, 5, 6})
      checkCase(c, i, c.name + "|" + std::to_string(i), {});
}

TEST(IndexBounds, EmptyDimsAndScalarsAsPyTorch) {
  for (const Special& s : specialCases())
    checkCase(s.c, s.value, s.c.name + "|-", {});
}

TEST(IndexBounds, CompiledFunctionsRaiseTheEagerErrors) {
  // Index ops run the interpreter's kernels inside compiled code: a bad index is the same
  // IndexError there (not a crash, not garbage), and a valid one the same values.
  for (const Case& c : dimCases()) {
    if (c.name == "bincount") continue; // reads values to size its output: runs eagerly
    auto compiled = compiledCall(c);
    for (int64_t i : {-4, -3, -1, 0, 2, 3})
      checkCase(c, i, c.name + "|" + std::to_string(i), compiled);
  }
  for (const Case& c : flatCases()) {
    auto compiled = compiledCall(c);
    for (int64_t i : {-7, -6, -1, 0, 5, 6})
      checkCase(c, i, c.name + "|" + std::to_string(i), compiled);
  }
  for (const Special& s : specialCases())
    checkCase(s.c, s.value, s.c.name + "|-", compiledCall(s.c));
}

TEST(IndexBounds, TheTableCoversEveryReferenceCase) {
  std::set<std::string> listed;
  for (const Case& c : dimCases())
    for (int64_t i : {-4, -3, -1, 0, 2, 3})
      listed.insert(c.name + "|" + std::to_string(i));
  for (const Case& c : flatCases())
    for (int64_t i : {-7, -6, -1, 0, 5, 6})
      listed.insert(c.name + "|" + std::to_string(i));
  for (const Special& s : specialCases())
    listed.insert(s.c.name + "|-");
  for (const auto& [key, want] : expectations())
    EXPECT_TRUE(listed.count(key)) << key << " of index_bounds.txt has no row in the table";
  EXPECT_EQ(listed.size(), expectations().size());
}

/// Sets the pool's thread count for a scope.
struct Threads {
  int saved = getNumThreads();
  explicit Threads(int n) { setNumThreads(n); }
  ~Threads() { setNumThreads(saved); }
};

TEST(IndexBounds, BadIndicesFoundOnThePoolAreOneErrorAtTheCallersLine) {
  // 1M indices split over 4 threads; two bad ones, in rows that pool threads (not this one)
  // check. The error reaching the caller is the first bad index in order, whichever thread finds
  // which first, and names the caller's line though a worker threw it.
  Threads four(4);
  constexpr int64_t kRows = 1024, kCols = 1024;
  std::vector<int64_t> ix(static_cast<size_t>(kRows * kCols), 1);
  ix[600 * kCols + 7] = -5;
  ix[900 * kCols + 3] = kCols;
  Tensor x = zeros({kRows, kCols}), index = from_vector(ix, {kRows, kCols});
  Tensor flat = index.reshape({-1}), row = zeros({kCols});
  const std::vector<std::pair<std::string, std::function<void(std::source_location)>>> calls{
      {"gather: index -5 is out of bounds for dimension 1 with size 1024",
       [&](std::source_location loc) { (void)x.gather(1, index, loc); }},
      {"index_select: index -5 is out of bounds for dimension 0 with size 1024",
       [&](std::source_location loc) { (void)row.index_select(0, flat, loc); }},
      // take wraps -5: its first bad index is the later one.
      {"take: index 1024 is out of bounds for a tensor of 1024 elements",
       [&](std::source_location loc) { (void)row.take(index, loc); }},
      {"scatter_add: index -5 is out of bounds for dimension 1 with size 1024",
       [&](std::source_location loc) { (void)x.scatter_add(1, index, x, loc); }},
  };
  for (const auto& [want, call] : calls)
    for (int repeat = 0; repeat < 10; ++repeat) {
      SCOPED_TRACE(want);
      const std::source_location here = std::source_location::current();
      try {
        call(here);
        ADD_FAILURE() << "no error";
      } catch (const IndexError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(want, 0), 0u) << what;
        EXPECT_NE(what.find("IndexBoundsTest.cpp:" + std::to_string(here.line())),
                  std::string::npos)
            << what;
      }
    }
}

} // namespace
} // namespace weft::test
