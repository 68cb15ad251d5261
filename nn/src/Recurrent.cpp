// RNN, LSTM and GRU: parameters, the layer-by-layer loop over time, and the three cells.
#include "weft/nn/Recurrent.h"

#include "weft/nn/Init.h"

#include <cmath>
#include <ostream>

namespace weft::nn {
namespace {

using Weights = std::array<Tensor, 4>; // weight_ih, weight_hh, bias_ih, bias_hh

/// One step of `cell` from the input projection `xw` (x_t W_ih^T + b_ih) and the state; updates
/// `h` (and `c` for an LSTM).
void step(RecurrentImpl::Cell cell, const Tensor& xw, const Weights& w, Tensor& h, Tensor& c) {
  Tensor hw = functional::linear(h, w[1], w[3]);
  switch (cell) {
  case RecurrentImpl::Cell::RnnTanh:
    h = (xw + hw).tanh();
    return;
  case RecurrentImpl::Cell::RnnRelu:
    h = relu(xw + hw);
    return;
  case RecurrentImpl::Cell::Lstm: {
    std::vector<Tensor> g = chunk(xw + hw, 4, -1);
    c = g[1].sigmoid() * c + g[0].sigmoid() * g[2].tanh();
    h = g[3].sigmoid() * c.tanh();
    return;
  }
  case RecurrentImpl::Cell::Gru: {
    std::vector<Tensor> gx = chunk(xw, 3, -1), gh = chunk(hw, 3, -1);
    Tensor r = (gx[0] + gh[0]).sigmoid(), z = (gx[1] + gh[1]).sigmoid();
    Tensor n = (gx[2] + r * gh[2]).tanh();
    h = n + z * (h - n); // (1 - z) n + z h
    return;
  }
  }
}

} // namespace

RecurrentImpl::RecurrentImpl(const RecurrentOptions& o, Cell cell, const char* name)
    : options(o), cell_(cell), name_(name) {
  WEFT_CHECK(o.input_size() > 0 && o.hidden_size() > 0 && o.num_layers() > 0, Value, "nn::", name,
             ": input_size, hidden_size and num_layers must be positive, got ", o.input_size(),
             ", ", o.hidden_size(), ", ", o.num_layers());
  WEFT_CHECK(o.dropout() >= 0 && o.dropout() <= 1, Value, "nn::", name,
             ": dropout must be in [0, 1], got ", o.dropout());
  int64_t g = gates(), h = o.hidden_size();
  for (int64_t layer = 0; layer < o.num_layers(); ++layer) {
    int64_t in = layer == 0 ? o.input_size() : h * directions();
    for (int64_t d = 0; d < directions(); ++d) {
      std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      Weights w;
      w[0] = register_parameter("weight_ih" + suffix, empty({g * h, in}));
      w[1] = register_parameter("weight_hh" + suffix, empty({g * h, h}));
      if (o.bias()) {
        w[2] = register_parameter("bias_ih" + suffix, empty({g * h}));
        w[3] = register_parameter("bias_hh" + suffix, empty({g * h}));
      }
      weights_.push_back(w);
    }
  }
  reset_parameters();
}

int64_t RecurrentImpl::gates() const {
  return cell_ == Cell::Lstm ? 4 : cell_ == Cell::Gru ? 3 : 1;
}

void RecurrentImpl::reset_parameters() {
  double bound = 1.0 / std::sqrt(static_cast<double>(options.hidden_size()));
  for (Tensor& p : all_weights())
    init::uniform_(p, -bound, bound);
}

std::vector<Tensor> RecurrentImpl::all_weights() const {
  std::vector<Tensor> out;
  for (const Weights& w : weights_)
    for (const Tensor& t : w)
      if (t.defined()) out.push_back(t);
  return out;
}

void RecurrentImpl::pretty_print(std::ostream& os) const {
  os << name_ << "(" << options.input_size() << ", " << options.hidden_size();
  if (options.num_layers() != 1) os << ", num_layers=" << options.num_layers();
  if (cell_ == Cell::RnnRelu) os << ", nonlinearity=relu";
  if (!options.bias()) os << ", bias=false";
  if (options.batch_first()) os << ", batch_first=true";
  if (options.dropout() != 0) os << ", dropout=" << options.dropout();
  if (options.bidirectional()) os << ", bidirectional=true";
  os << ")";
}

std::pair<Tensor, std::vector<Tensor>>
RecurrentImpl::run(const Tensor& input, std::vector<Tensor> states, std::source_location loc) {
  CallSite cs(loc);
  const RecurrentOptions& o = options;
  WEFT_CHECK(input.defined() && (input.dim() == 2 || input.dim() == 3), Shape, "nn::", name_,
             ": expected an input of 2 (unbatched) or 3 dimensions, got ",
             input.defined() ? shapeString(input.sizes()) : "an undefined tensor");
  WEFT_CHECK(input.size(-1) == o.input_size(), Shape, "nn::", name_, ": input ",
             shapeString(input.sizes()), " does not end in input_size = ", o.input_size());
  bool batched = input.dim() == 3;
  // Work in (seq, batch, feature).
  Tensor x = !batched ? input.unsqueeze(1) : o.batch_first() ? input.transpose(0, 1) : input;
  int64_t seq = x.size(0), batch = x.size(1), h = o.hidden_size(), dirs = directions();
  Shape stateShape =
      batched ? Shape{o.num_layers() * dirs, batch, h} : Shape{o.num_layers() * dirs, h};
  for (Tensor& s : states) {
    if (!s.defined()) {
      s = zeros({o.num_layers() * dirs, batch, h},
                TensorOptions().dtype(x.dtype()).device(x.device()));
      continue;
    }
    WEFT_CHECK(s.sizes() == stateShape, Shape, "nn::", name_, ": expected an initial state of ",
               shapeString(stateShape), ", got ", shapeString(s.sizes()));
    if (!batched) s = s.unsqueeze(1);
  }

  std::vector<std::vector<Tensor>> finals(states.size());
  for (int64_t layer = 0; layer < o.num_layers(); ++layer) {
    std::vector<Tensor> perDirection;
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t index = layer * dirs + d;
      const Weights& w = weights_[static_cast<size_t>(index)];
      // The input projection of every step at once: one GEMM instead of seq small ones.
      Tensor xw = functional::linear(x, w[0], w[2]);
      Tensor hs = states[0].select(0, index);
      Tensor cs = states.size() > 1 ? states[1].select(0, index) : Tensor();
      std::vector<Tensor> outputs(static_cast<size_t>(seq));
      for (int64_t i = 0; i < seq; ++i) {
        int64_t t = d == 0 ? i : seq - 1 - i;
        step(cell_, xw.select(0, t), w, hs, cs);
        outputs[static_cast<size_t>(t)] = hs;
      }
      perDirection.push_back(
          seq > 0 ? stack(outputs, 0)
                  : zeros({0, batch, h}, TensorOptions(x.dtype()).device(x.device())));
      finals[0].push_back(hs);
      if (cs.defined()) finals[1].push_back(cs);
    }
    x = dirs == 1 ? perDirection[0] : cat(perDirection, 2);
    if (layer + 1 < o.num_layers() && o.dropout() > 0 && is_training())
      x = functional::dropout(x, o.dropout(), true);
  }
  std::vector<Tensor> out;
  for (auto& f : finals)
    out.push_back(batched ? stack(f, 0) : stack(f, 0).squeeze(1));
  Tensor y = !batched ? x.squeeze(1) : o.batch_first() ? x.transpose(0, 1) : x;
  return {y, out};
}

RNNImpl::RNNImpl(const RNNOptions& o)
    : RecurrentImpl(o, o.nonlinearity() == "relu" ? Cell::RnnRelu : Cell::RnnTanh, "RNN") {
  WEFT_CHECK(o.nonlinearity() == "tanh" || o.nonlinearity() == "relu", Value,
             "nn::RNN: nonlinearity must be \"tanh\" or \"relu\", got \"", o.nonlinearity(), "\"");
}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, const Tensor& hx,
                                            std::source_location loc) {
  auto [y, states] = run(input, {hx}, loc);
  return {y, states[0]};
}

namespace {
const RecurrentOptions& tanhOnly(const RecurrentOptions& o, const char* name) {
  WEFT_CHECK(o.nonlinearity() == "tanh", Value, "nn::", name,
             ": nonlinearity is an option of RNN only");
  return o;
}
} // namespace

LSTMImpl::LSTMImpl(const LSTMOptions& o) : RecurrentImpl(tanhOnly(o, "LSTM"), Cell::Lstm, "LSTM") {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>>
LSTMImpl::forward(const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& hx,
                  std::source_location loc) {
  std::vector<Tensor> states = hx ? std::vector<Tensor>{std::get<0>(*hx), std::get<1>(*hx)}
                                  : std::vector<Tensor>{Tensor(), Tensor()};
  auto [y, finals] = run(input, states, loc);
  return {y, {finals[0], finals[1]}};
}

GRUImpl::GRUImpl(const GRUOptions& o) : RecurrentImpl(tanhOnly(o, "GRU"), Cell::Gru, "GRU") {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, const Tensor& hx,
                                            std::source_location loc) {
  auto [y, states] = run(input, {hx}, loc);
  return {y, states[0]};
}

} // namespace weft::nn
