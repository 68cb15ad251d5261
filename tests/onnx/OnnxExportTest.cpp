// ONNX export's structure and errors: initializers named as the module names its weights, the
// options' names, graph outputs that alias inputs or each other, each node's source line, and
// clear errors (an op ONNX lacks names it and the line that called it; state updates, value reads
// and wrong names are refused; a failed export leaves the file it would have replaced).
// onnx_matches_onnxruntime checks the values, in onnxruntime.
#include "TestUtil.h"

#include <weft/Onnx.h>
#include <weft/weft.h>

#include "weft/ir/TextFormat.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

using namespace weft;
using test::has;
using test::messageOf;
namespace fs = std::filesystem;

namespace {

std::string tempPath(const std::string& name) {
  return test::tempPath("weft_onnx_", name);
}

onnx::ModelProto readModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in)) << path;
  return m;
}

std::set<std::string> initializerNames(const onnx::ModelProto& m) {
  std::set<std::string> names;
  for (const auto& t : m.graph().initializer())
    names.insert(t.name());
  return names;
}

TensorFunction forwardOf(nn::Sequential& s) {
  return [&s](const std::vector<Tensor>& in) { return std::vector<Tensor>{s->forward(in[0])}; };
}

} // namespace

TEST(OnnxExport, WeightsAreInitializersNamedAsTheModuleNamesThem) {
  nn::Sequential net(nn::Linear(6, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 3));
  const std::string path = tempPath("names.onnx");
  export_onnx(*net, forwardOf(net), {randn({5, 6})}, path,
              OnnxOptions().input_names({"features"}).output_names({"logits"}));
  onnx::ModelProto m = readModel(path);
  EXPECT_EQ(m.producer_name(), "weft");
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), kOnnxOpset);
  std::set<std::string> names = initializerNames(m);
  for (const char* w : {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                        "1.running_var", "3.weight", "3.bias"})
    EXPECT_TRUE(names.contains(w)) << w;
  // The step counter is read by no eval-mode op: it is not in the model.
  EXPECT_FALSE(names.contains("1.num_batches_tracked"));
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(m.graph().input(0).name(), "features");
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().output(0).name(), "logits");
  const auto& dims = m.graph().output(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 2);
  EXPECT_EQ(dims[0].dim_value(), 5);
  EXPECT_EQ(dims[1].dim_value(), 3);
  // Each node says which line of C++ made it; the linear layers' matmuls come from Layers.cpp.
  bool matmulLine = false;
  for (const auto& n : m.graph().node()) {
    EXPECT_FALSE(n.doc_string().empty()) << n.op_type();
    matmulLine = matmulLine || (n.op_type() == "MatMul" && has(n.doc_string(), "Layers.cpp:"));
  }
  EXPECT_TRUE(matmulLine);
  // The weights' bytes are the module's.
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != "3.bias") continue;
    Tensor bias;
    for (auto& [name, p] : net->named_parameters())
      if (name == "3.bias") bias = p;
    ASSERT_EQ(t.raw_data().size(), 3 * sizeof(float));
    EXPECT_EQ(std::memcmp(t.raw_data().data(), bias.data_ptr(), 3 * sizeof(float)), 0);
  }
  fs::remove(path);
}

TEST(OnnxExport, AnOpOnnxLacksIsAnErrorNamingItAndTheLineThatCalledIt) {
  nn::Sequential net(nn::Linear(4, 4));
  const int line = __LINE__ + 2;
  TensorFunction fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{net->forward(in[0]).lgamma()};
  };
  std::string msg = messageOf<ValueError>(
      [&] { export_onnx(*net, fn, {randn({2, 4})}, tempPath("lgamma.onnx")); });
  EXPECT_TRUE(has(msg, "lgamma")) << msg;
  EXPECT_TRUE(has(msg, "OnnxExportTest.cpp:" + std::to_string(line))) << msg;
  EXPECT_FALSE(fs::exists(tempPath("lgamma.onnx")));
}

TEST(OnnxExport, AFailedExportLeavesTheFileItWouldHaveReplaced) {
  const std::string path = tempPath("kept.onnx");
  std::ofstream(path) << "the previous model";
  nn::Sequential net(nn::Linear(4, 4));
  TensorFunction fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{net->forward(in[0]).digamma()};
  };
  EXPECT_THROW(export_onnx(*net, fn, {randn({2, 4})}, path), ValueError);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "the previous model");
  fs::remove(path);
}

TEST(OnnxExport, OutputsThatAreInputsWeightsOrEachOtherGetTheirOwnNames) {
  nn::Sequential net(nn::Linear(3, 2));
  TensorFunction fn = [&](const std::vector<Tensor>& in) {
    Tensor y = net->forward(in[0]);
    return std::vector<Tensor>{y, in[0], y, net->named_parameters()[1].second, y.relu()};
  };
  const std::string path = tempPath("aliases.onnx");
  export_onnx(*net, fn, {randn({4, 3})}, path);
  onnx::ModelProto m = readModel(path);
  ASSERT_EQ(m.graph().output_size(), 5);
  std::set<std::string> produced;
  for (const auto& n : m.graph().node())
    for (const auto& o : n.output())
      EXPECT_TRUE(produced.insert(o).second) << o << " is written twice";
  for (const auto& o : m.graph().output())
    EXPECT_TRUE(produced.contains(o.name())) << o.name() << " is computed by no node";
  fs::remove(path);
}

TEST(OnnxExport, AHolderExportsItsForwardAndTheTensorsOfATuple) {
  nn::LSTM lstm(nn::LSTMOptions(3, 5));
  const std::string path = tempPath("lstm.onnx");
  lstm->train();
  export_onnx(lstm, {randn({4, 2, 3})}, path);
  EXPECT_TRUE(lstm->is_training()); // the mode is restored
  onnx::ModelProto m = readModel(path);
  ASSERT_EQ(m.graph().output_size(), 3); // output, h_n, c_n
  std::set<std::string> names = initializerNames(m);
  EXPECT_TRUE(names.contains("weight_ih_l0"));
  EXPECT_TRUE(names.contains("bias_hh_l0"));
  fs::remove(path);
}

TEST(OnnxExport, FunctionsThatUpdateStateOrReadValuesAreRefused) {
  struct Counter : nn::Module {
    Tensor count = register_buffer("count", zeros({1}));
  };
  Counter counter;
  TensorFunction updates = [&](const std::vector<Tensor>& in) {
    counter.count.add_(1);
    return std::vector<Tensor>{in[0] + counter.count};
  };
  std::string msg = messageOf<ValueError>(
      [&] { export_onnx(counter, updates, {randn({2})}, tempPath("updates.onnx")); });
  EXPECT_TRUE(has(msg, "updates state")) << msg;
  EXPECT_TRUE(has(msg, "count")) << msg;

  TensorFunction reads = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * in[0].sum().item<float>()};
  };
  EXPECT_THROW(export_onnx(counter, reads, {randn({2})}, tempPath("reads.onnx")), Error);
}

TEST(OnnxExport, NamesMustMatchTheInputsAndOutputs) {
  nn::Sequential net(nn::Linear(2, 2));
  std::string msg = messageOf<ValueError>([&] {
    export_onnx(*net, forwardOf(net), {randn({1, 2})}, tempPath("n.onnx"),
                OnnxOptions().input_names({"a", "b"}));
  });
  EXPECT_TRUE(has(msg, "2 input names for 1 inputs")) << msg;
  msg = messageOf<ValueError>([&] {
    export_onnx(*net, forwardOf(net), {randn({1, 2})}, tempPath("n.onnx"),
                OnnxOptions().input_names({"x"}).output_names({"x"}));
  });
  EXPECT_TRUE(has(msg, "'x' is given twice")) << msg;
  msg = messageOf<IOError>([&] {
    export_onnx(*net, forwardOf(net), {randn({1, 2})}, "/nonexistent-dir/model.onnx");
  });
  EXPECT_TRUE(has(msg, "/nonexistent-dir/model.onnx")) << msg;
}

TEST(OnnxExport, TextIrTranslatesWithItsState) {
  ir::Result<ir::Graph> g = ir::parseGraph(R"(
graph @f(%x: float32[2, 3]) state(%w: float32[3, 4]) {
  %0 = matmul(%x, %w) : float32[2, 4]
  %1 = tanh(%0) : float32[2, 4]
  return(%1)
}
)");
  ASSERT_TRUE(static_cast<bool>(g)) << g.diagnostic().message;
  std::string bytes = onnx_model(g.value(), {randn({3, 4})});
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  EXPECT_TRUE(initializerNames(m).contains("w"));
  ASSERT_EQ(m.graph().node_size(), 2);
  EXPECT_EQ(m.graph().node(0).op_type(), "MatMul");
  EXPECT_EQ(m.graph().node(1).op_type(), "Tanh");
  EXPECT_EQ(m.graph().output(0).name(), "out0");
  EXPECT_EQ(m.graph().node(1).output(0), "out0"); // the node writes the output itself
  // State of another shape than the graph reads is refused.
  std::string msg =
      messageOf<ValueError>([&] { onnx_model(g.value(), {randn({4, 3})}); });
  EXPECT_TRUE(has(msg, "state 0 (w)")) << msg;
}

TEST(OnnxExport, ADynamicDimensionIsNamedInTheInputsAndOutputs) {
  nn::Sequential net(nn::Linear(6, 4), nn::ReLU(), nn::Flatten(nn::FlattenOptions().start_dim(0)));
  const std::string path = tempPath("dynamic.onnx");
  export_onnx(*net, forwardOf(net), {randn({5, 6})}, path, OnnxOptions().dynamic_dim(0, {}, "N"));
  onnx::ModelProto m = readModel(path);
  const auto& in = m.graph().input(0).type().tensor_type().shape().dim();
  EXPECT_EQ(in[0].dim_param(), "N");
  EXPECT_EQ(in[1].dim_value(), 6);
  // The output flattens N rows of 4: a dimension of 4*N.
  const auto& out = m.graph().output(0).type().tensor_type().shape().dim();
  ASSERT_EQ(out.size(), 1);
  EXPECT_EQ(out[0].dim_param(), "4*N");
  fs::remove(path);
}

TEST(OnnxExport, WhatDependsOnTheDynamicSizeOtherwiseIsAnErrorNamingIt) {
  nn::Sequential net(nn::Linear(3, 3));
  auto exportOf = [&](TensorFunction fn) {
    return messageOf<ValueError>([&] {
      export_onnx(*net, fn, {randn({4, 3})}, tempPath("d.onnx"), OnnxOptions().dynamic_dim(0));
    });
  };
  // All rows but the last: a number of rows that depends on the size.
  const int sliceLine = __LINE__ + 2;
  std::string msg = exportOf([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].narrow(0, 0, in[0].size(0) - 1)};
  });
  EXPECT_TRUE(has(msg, "slice")) << msg;
  EXPECT_TRUE(has(msg, "OnnxExportTest.cpp:" + std::to_string(sliceLine))) << msg;
  // A tensor made with the batch's size is a constant of one size.
  msg = exportOf([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + arange(in[0].size(0)).unsqueeze(1)};
  });
  EXPECT_TRUE(has(msg, "sized by the dynamic dimension")) << msg;
  // A dimension other inputs do not have.
  msg = messageOf<ValueError>([&] {
    export_onnx(*net, forwardOf(net), {randn({4, 3})}, tempPath("d.onnx"),
                OnnxOptions().dynamic_dim(2));
  });
  EXPECT_TRUE(has(msg, "dynamic_dim(2)")) << msg;
  msg = messageOf<ValueError>([&] {
    export_onnx(*net, forwardOf(net), {randn({4, 3})}, tempPath("d.onnx"),
                OnnxOptions().dynamic_dim(-1));
  });
  EXPECT_TRUE(has(msg, "must be >= 0")) << msg;
  // A constant computed from the size holds other values at another size.
  msg = exportOf([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * tensor({static_cast<double>(in[0].size(0))})};
  });
  EXPECT_TRUE(has(msg, "holds other values")) << msg;
  // onnx_model() has no second trace to learn the dimension from.
  ir::Result<ir::Graph> g = ir::parseGraph(R"(
graph @f(%x: float32[2, 3]) {
  %0 = tanh(%x) : float32[2, 3]
  return(%0)
}
)");
  ASSERT_TRUE(static_cast<bool>(g));
  msg = messageOf<ValueError>([&] { onnx_model(g.value(), {}, OnnxOptions().dynamic_dim(0)); });
  EXPECT_TRUE(has(msg, "static shapes")) << msg;
}

TEST(OnnxExport, RandomDrawsBecomeOnnxRandomOps) {
  nn::Sequential net(nn::Linear(3, 3));
  TensorFunction fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + randn({2, 3}) * 0.1 + rand({2, 3})};
  };
  const std::string path = tempPath("random.onnx");
  export_onnx(*net, fn, {randn({2, 3})}, path);
  onnx::ModelProto m = readModel(path);
  std::multiset<std::string> ops;
  for (const auto& n : m.graph().node())
    ops.insert(n.op_type());
  EXPECT_EQ(ops.count("RandomNormal"), 1u);
  EXPECT_EQ(ops.count("RandomUniform"), 1u);
  fs::remove(path);
}
