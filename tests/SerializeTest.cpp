// weft::save / weft::load: round trips of tensors, lists, modules and optimizers, loads that
// check everything before changing anything, and the errors naming the file.
#include "TestUtil.h"

#include <string>
#include <vector>

namespace weft::test {
namespace {

/// A small model with a buffer (BatchNorm's running statistics) besides its parameters.
nn::Sequential makeModel() {
  return nn::Sequential(nn::Linear(4, 6), nn::BatchNorm1d(6), nn::ReLU(), nn::Linear(6, 3));
}

/// One Adam step of `model` on a fixed batch.
void trainStep(nn::Sequential& model, optim::Optimizer& opt) {
  Tensor x = randn({8, 4}, {}, Generator(1)), y = randint(3, {8}, kInt64, Generator(2));
  opt.zero_grad();
  nn::functional::cross_entropy(model->forward(x), y).backward();
  opt.step();
}

TEST(Serialize, TensorsRoundTripWithTheirDtypeAndShape) {
  TempDir dir;
  const std::string path = (dir.path / "t.safetensors").string();
  for (Tensor t : {randn({3, 4}), randn({2, 3}, kFloat64).t(), arange(6).reshape({2, 3}),
                   tensor({true, false, true}), full({}, 2.5), zeros({0, 3})}) {
    save(t, path);
    Tensor u;
    load(u, path);
    EXPECT_TRUE(sameBytes(u, t)) << shapeString(t.sizes()) << " " << dtypeName(t.dtype());
  }
  EXPECT_EQ(safetensors::metadata(path).at("weft.object"), "tensor");
}

TEST(Serialize, LoadingIntoADefinedTensorKeepsItsIdentity) {
  TempDir dir;
  const std::string path = (dir.path / "t.safetensors").string();
  Tensor saved = arange(5.0);
  save(saved, path);
  // As LibTorch's set_: every handle to the tensor sees the loaded values, shape and dtype.
  Tensor t = zeros({2}, kInt64), alias = t;
  load(t, path);
  EXPECT_TRUE(sameBytes(alias, saved));
  // A parameter keeps requiring grad.
  Tensor w = zeros({5}).requires_grad_();
  load(w, path);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(sameBytes(w.detach(), saved));
}

TEST(Serialize, ListsRoundTripInOrderAndReplaceTheContents) {
  TempDir dir;
  const std::string path = (dir.path / "v.safetensors").string();
  std::vector<Tensor> saved;
  for (int i = 0; i < 12; ++i) // more than 10: "10" sorts before "2" in the file
    saved.push_back(full({i + 1}, i, i % 2 ? kInt64 : kFloat32));
  save(saved, path);
  std::vector<Tensor> loaded{ones({1})};
  load(loaded, path);
  ASSERT_EQ(loaded.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i)
    EXPECT_TRUE(sameBytes(loaded[i], saved[i])) << i;
  save(std::vector<Tensor>{}, path);
  load(loaded, path);
  EXPECT_TRUE(loaded.empty());
}

TEST(Serialize, ALoadedModuleGivesTheSameOutput) {
  TempDir dir;
  const std::string path = (dir.path / "m.safetensors").string();
  manual_seed(3);
  nn::Sequential model = makeModel();
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
  trainStep(model, opt); // running statistics and weights away from their initial values
  save(model, path);
  nn::Sequential other = makeModel();
  load(other, path);
  model->eval();
  other->eval();
  Tensor x = randn({5, 4});
  EXPECT_TRUE(sameBytes(other->forward(x), model->forward(x)));
  for (const auto& [name, t] : model->state_dict())
    EXPECT_TRUE(sameBytes(other->state_dict().at(name), t)) << name;
  // The module itself, a shared pointer to it, and a holder: one format.
  nn::Linear linear(4, 6), copy(4, 6);
  save(*linear, path);
  load(copy.ptr(), path);
  EXPECT_TRUE(sameBytes(copy->weight, linear->weight));
  std::shared_ptr<nn::Module> base = copy.ptr();
  save(base, path);
  load(*linear, path);
  EXPECT_TRUE(sameBytes(linear->bias, copy->bias));
}

TEST(Serialize, ALoadedOptimizerContinuesAsTheSavedOne) {
  TempDir dir;
  const std::string modelPath = (dir.path / "m.safetensors").string();
  const std::string optPath = (dir.path / "o.safetensors").string();
  manual_seed(4);
  nn::Sequential model = makeModel();
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01).amsgrad(true));
  trainStep(model, opt);
  trainStep(model, opt);
  save(model, modelPath);
  save(opt, optPath);
  EXPECT_EQ(safetensors::metadata(optPath).at("weft.optimizer"), "Adam");
  nn::Sequential resumed = makeModel();
  optim::Adam resumedOpt(resumed->parameters(), optim::AdamOptions(0.01).amsgrad(true));
  load(resumed, modelPath);
  load(resumedOpt, optPath);
  trainStep(model, opt);
  trainStep(resumed, resumedOpt);
  for (const auto& [name, t] : model->state_dict())
    EXPECT_TRUE(sameBytes(resumed->state_dict().at(name), t)) << name;
}

TEST(Serialize, AFileOfAnotherKindIsAnErrorNamingBoth) {
  TempDir dir;
  const std::string tensorPath = (dir.path / "t.safetensors").string();
  const std::string modulePath = (dir.path / "m.safetensors").string();
  const std::string optPath = (dir.path / "o.safetensors").string();
  save(randn({6, 4}), tensorPath);
  nn::Linear model(4, 6);
  save(model, modulePath);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  save(sgd, optPath);
  EXPECT_TRUE(throwsWith<IOError>([&] { load(model, tensorPath); },
                                  {"weft::load", tensorPath, "holds a tensor",
                                   "not a module's state_dict", "SerializeTest.cpp"}));
  Tensor t;
  EXPECT_TRUE(throwsWith<IOError>([&] { load(t, modulePath); },
                                  {modulePath, "holds a module's state_dict", "not a tensor"}));
  std::vector<Tensor> list;
  EXPECT_TRUE(throwsWith<IOError>([&] { load(list, tensorPath); }, {"not a list of tensors"}));
  optim::Adam adam(model->parameters());
  EXPECT_TRUE(throwsWith<IOError>([&] { load(adam, optPath); },
                                  {optPath, "the state of SGD, not of Adam"}));
  EXPECT_TRUE(throwsWith<IOError>([&] { load(adam, modulePath); }, {"not an optimizer's"}));
  // A safetensors file weft::save did not write, a damaged one, none at all.
  const std::string plain = (dir.path / "plain.safetensors").string();
  safetensors::save_file({{"weight", randn({6, 4})}}, plain);
  EXPECT_TRUE(
      throwsWith<IOError>([&] { load(model, plain); }, {plain, "was not written by weft::save"}));
  const std::string damaged =
      dir.write("damaged.safetensors", std::string("\x10\0\0\0\0\0\0\0{\"a\":", 13));
  EXPECT_THROW(load(model, damaged), IOError);
  EXPECT_THROW(load(t, (dir.path / "missing").string()), IOError);
}

TEST(Serialize, LoadsChangeNothingUnlessAllFits) {
  TempDir dir;
  const std::string path = (dir.path / "m.safetensors").string();
  nn::Linear small(3, 4), big(3, 5);
  save(small, path);
  Tensor before = big->weight.clone();
  std::string m = messageOf<ShapeError>([&] { load(big, path); });
  EXPECT_TRUE(has(m, "weft::load: '" + path + "' does not fit") && has(m, "'bias'") &&
              has(m, "[4]") && has(m, "[5]"))
      << m;
  EXPECT_EQ(m.find("called from"), m.rfind("called from")) << "the line is named once: " << m;
  EXPECT_TRUE(sameBytes(big->weight, before));
  // A key the module lacks: strict, as LibTorch's torch::load.
  nn::Linear noBias(nn::LinearOptions(3, 4).bias(false));
  EXPECT_TRUE(throwsWith<ValueError>([&] { load(noBias, path); }, {"unexpected key 'bias'"}));
  // A tensor or a list whose load fails keeps its old value.
  Tensor t = ones({2});
  std::vector<Tensor> list{ones({1})};
  EXPECT_THROW(load(t, path), IOError);
  EXPECT_THROW(load(list, path), IOError);
  EXPECT_TRUE(sameBytes(t, ones({2})));
  ASSERT_EQ(list.size(), 1u);
}

TEST(Serialize, WhatCannotBeSavedOrLoadedIsAnError) {
  TempDir dir;
  const std::string path = (dir.path / "x.safetensors").string();
  EXPECT_TRUE(throwsWith<ValueError>([&] { save(Tensor(), path); }, {"weft::save", "undefined"}));
  EXPECT_TRUE(throwsWith<ValueError>(
      [&] {
        save(std::vector<Tensor>{ones({1}), Tensor()}, path);
      },
      {"tensor 1 of the list is undefined"}));
  EXPECT_TRUE(throwsWith<ValueError>([&] { save(std::shared_ptr<nn::Module>(), path); },
                                     {"weft::save", "null"}));
  EXPECT_THROW(save(nn::Linear(nullptr), path), ValueError);
  // A tensor computed by autograd cannot take loaded data (it is not a leaf).
  save(ones({2}), path);
  Tensor computed = ones({2}).requires_grad_() * 2;
  EXPECT_TRUE(throwsWith<ValueError>([&] { load(computed, path); }, {"grad_fn"}));
}

} // namespace
} // namespace weft::test
