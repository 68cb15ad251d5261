// Attention and transformer layers: MultiheadAttention, TransformerEncoderLayer and
// TransformerDecoderLayer (post- or pre-norm), with PyTorch's parameter names, mask conventions
// and initialisation.
#pragma once

#include "weft/nn/Layers.h"

#include <string>
#include <tuple>

namespace weft::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  WEFT_ARG(int64_t, embed_dim);
  WEFT_ARG(int64_t, num_heads);
  /// Dropout on the attention weights, in training mode.
  WEFT_ARG(double, dropout) = 0.0;
  WEFT_ARG(bool, bias) = true;
  /// Feature sizes of key and value (0: embed_dim).
  WEFT_ARG(int64_t, kdim) = 0;
  WEFT_ARG(int64_t, vdim) = 0;
  /// Inputs and outputs are (batch, seq, feature) instead of (seq, batch, feature).
  WEFT_ARG(bool, batch_first) = false;
};

/// Attention over `num_heads` heads, as PyTorch's: parameters `in_proj_weight` (3E, E) and
/// `in_proj_bias`, or `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when kdim or vdim differ
/// from E, and the output projection `out_proj`.
///
/// Masks follow PyTorch's nn.MultiheadAttention: a boolean `attn_mask` (L, S) or
/// (batch * heads, L, S) is true where attention is *not* allowed, a floating one is added to
/// the scores; `key_padding_mask` (batch, S) is true (or -inf) at padding keys; `is_causal`
/// forbids attending to later positions.
class MultiheadAttentionImpl : public Module {
public:
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  /// Returns the output (L, batch, E) and, if `need_weights`, the attention weights
  /// (batch, L, S) averaged over heads, or (batch, heads, L, S) unaveraged.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false, WEFT_LOC);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight;
  Linear out_proj = nullptr;
};
WEFT_MODULE(MultiheadAttention);

struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  WEFT_ARG(int64_t, d_model);
  WEFT_ARG(int64_t, nhead);
  WEFT_ARG(int64_t, dim_feedforward) = 2048;
  WEFT_ARG(double, dropout) = 0.1;
  /// "relu" or "gelu".
  WEFT_ARG(std::string, activation) = "relu";
  WEFT_ARG(double, layer_norm_eps) = 1e-5;
  WEFT_ARG(bool, batch_first) = false;
  /// Pre-norm (normalize before attention and the feed-forward block) instead of post-norm.
  WEFT_ARG(bool, norm_first) = false;
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

/// Self-attention and a feed-forward block, each with a residual connection and layer norm.
class TransformerEncoderLayerImpl : public Module {
public:
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {}, bool is_causal = false, WEFT_LOC);

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn = nullptr;
  Linear linear1 = nullptr, linear2 = nullptr;
  Dropout dropout = nullptr, dropout1 = nullptr, dropout2 = nullptr;
  LayerNorm norm1 = nullptr, norm2 = nullptr;

private:
  Tensor feedForward(const Tensor& x);
};
WEFT_MODULE(TransformerEncoderLayer);

/// Self-attention, attention over the encoder's `memory`, and a feed-forward block.
class TransformerDecoderLayerImpl : public Module {
public:
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, bool tgt_is_causal = false,
                 bool memory_is_causal = false, WEFT_LOC);

  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn = nullptr, multihead_attn = nullptr;
  Linear linear1 = nullptr, linear2 = nullptr;
  Dropout dropout = nullptr, dropout1 = nullptr, dropout2 = nullptr, dropout3 = nullptr;
  LayerNorm norm1 = nullptr, norm2 = nullptr, norm3 = nullptr;

private:
  Tensor feedForward(const Tensor& x);
};
WEFT_MODULE(TransformerDecoderLayer);

} // namespace weft::nn
