// Recurrent layers: RNN (tanh or relu), LSTM and GRU, multi-layer and bidirectional, with
// PyTorch's parameter names, gate order, shapes and initialisation. Each is a loop of primitives
// over time: eagerly a define-by-run graph, inside compile() an unrolled trace.
#pragma once

#include "weft/nn/Functional.h"
#include "weft/nn/Module.h"

#include <array>
#include <optional>
#include <string>
#include <tuple>

namespace weft::nn {

/// Options of RNN, LSTM and GRU.
struct RecurrentOptions {
  RecurrentOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  WEFT_ARG(int64_t, input_size);
  WEFT_ARG(int64_t, hidden_size);
  WEFT_ARG(int64_t, num_layers) = 1;
  /// "tanh" or "relu"; RNN only.
  WEFT_ARG(std::string, nonlinearity) = "tanh";
  WEFT_ARG(bool, bias) = true;
  /// Inputs and outputs are (batch, seq, feature) instead of (seq, batch, feature).
  WEFT_ARG(bool, batch_first) = false;
  /// Dropout on the outputs of every layer but the last, in training mode.
  WEFT_ARG(double, dropout) = 0.0;
  WEFT_ARG(bool, bidirectional) = false;
};
using RNNOptions = RecurrentOptions;
using LSTMOptions = RecurrentOptions;
using GRUOptions = RecurrentOptions;

/// The shared machinery of RNN, LSTM and GRU: parameters `weight_ih_l{k}`, `weight_hh_l{k}`,
/// `bias_ih_l{k}`, `bias_hh_l{k}` (suffix `_reverse` for the backward direction), all
/// U(-1/sqrt(hidden), 1/sqrt(hidden)).
class RecurrentImpl : public Module {
public:
  enum class Cell { RnnTanh, RnnRelu, Lstm, Gru };

  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  /// Every layer's weights in PyTorch's order (ih, hh, then the biases), per layer and direction.
  std::vector<Tensor> all_weights() const;

  RecurrentOptions options;

protected:
  RecurrentImpl(const RecurrentOptions& options, Cell cell, const char* name);
  /// Runs all layers over `input` from `states` ({h0} or {h0, c0}, undefined for zeros); returns
  /// the output sequence and the final states.
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& input, std::vector<Tensor> states,
                                             std::source_location loc);

private:
  int64_t gates() const;
  int64_t directions() const { return options.bidirectional() ? 2 : 1; }
  Cell cell_;
  const char* name_;
  /// Per layer and direction: {weight_ih, weight_hh, bias_ih, bias_hh} (biases may be undefined).
  std::vector<std::array<Tensor, 4>> weights_;
};

/// An Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).
class RNNImpl : public RecurrentImpl {
public:
  explicit RNNImpl(const RNNOptions& options);
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  /// `input` (seq, batch, input_size), or (seq, input_size) unbatched; `hx` (layers * directions,
  /// batch, hidden), zeros if undefined. Returns (output (seq, batch, directions * hidden), h_n).
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, WEFT_LOC);
};
WEFT_MODULE(RNN);

/// Long short-term memory, gates in PyTorch's order (input, forget, cell, output).
class LSTMImpl : public RecurrentImpl {
public:
  explicit LSTMImpl(const LSTMOptions& options);
  LSTMImpl(int64_t input_size, int64_t hidden_size)
      : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  /// As RNN's, with the state a pair (h, c). Returns (output, (h_n, c_n)).
  std::tuple<Tensor, std::tuple<Tensor, Tensor>>
  forward(const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& hx = std::nullopt,
          WEFT_LOC);
};
WEFT_MODULE(LSTM);

/// Gated recurrent unit, gates in PyTorch's order (reset, update, new); the reset gate scales
/// the hidden projection including its bias, as PyTorch's.
class GRUImpl : public RecurrentImpl {
public:
  explicit GRUImpl(const GRUOptions& options);
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, WEFT_LOC);
};
WEFT_MODULE(GRU);

} // namespace weft::nn
