// MultiheadAttention and the transformer encoder and decoder layers.
#include "weft/nn/Transformer.h"

#include "weft/nn/Init.h"

#include <cmath>
#include <limits>
#include <ostream>

namespace weft::nn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Applies a PyTorch-convention mask to `scores`: boolean true (masked) becomes -inf, a floating
/// mask is added.
Tensor applyMask(const Tensor& scores, const Tensor& mask) {
  return mask.dtype() == DType::Bool ? scores.masked_fill(mask, -kInf) : scores + mask;
}

} // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& o) : options(o) {
  int64_t e = o.embed_dim(), heads = o.num_heads();
  WEFT_CHECK(e > 0 && heads > 0 && e % heads == 0, Value, "nn::MultiheadAttention: embed_dim (", e,
             ") must be a positive multiple of num_heads (", heads, ")");
  WEFT_CHECK(o.dropout() >= 0 && o.dropout() <= 1, Value,
             "nn::MultiheadAttention: dropout must be in [0, 1], got ", o.dropout());
  int64_t kdim = o.kdim() > 0 ? o.kdim() : e, vdim = o.vdim() > 0 ? o.vdim() : e;
  if (kdim == e && vdim == e) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, vdim}));
  }
  if (o.bias()) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  out_proj = register_module("out_proj", Linear(LinearOptions(e, e).bias(o.bias())));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  for (Tensor* w : {&in_proj_weight, &q_proj_weight, &k_proj_weight, &v_proj_weight})
    if (w->defined()) init::xavier_uniform_(*w);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

void MultiheadAttentionImpl::pretty_print(std::ostream& os) const {
  os << "MultiheadAttention(embed_dim=" << options.embed_dim()
     << ", num_heads=" << options.num_heads();
  if (options.dropout() != 0) os << ", dropout=" << options.dropout();
  if (options.batch_first()) os << ", batch_first=true";
  os << ")";
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key,
                                                           const Tensor& value,
                                                           const Tensor& keyPaddingMask,
                                                           bool needWeights, const Tensor& attnMask,
                                                           bool averageWeights, bool isCausal,
                                                           std::source_location loc) {
  CallSite cs(loc);
  int64_t e = options.embed_dim(), heads = options.num_heads(), hd = e / heads;
  WEFT_CHECK(query.defined() && key.defined() && value.defined(), Value,
             "nn::MultiheadAttention: query, key and value must be defined");
  WEFT_CHECK((query.dim() == 2 || query.dim() == 3) && key.dim() == query.dim() &&
                 value.dim() == query.dim(),
             Shape,
             "nn::MultiheadAttention: expected query, key and value of 3 dimensions (or 2, "
             "unbatched), got ",
             shapeString(query.sizes()), ", ", shapeString(key.sizes()), ", ",
             shapeString(value.sizes()));
  bool batched = query.dim() == 3;
  // Work in (seq, batch, feature), as PyTorch does.
  auto seqFirst = [&](const Tensor& t) {
    return !batched ? t.unsqueeze(1) : options.batch_first() ? t.transpose(0, 1) : t;
  };
  Tensor q = seqFirst(query), k = seqFirst(key), v = seqFirst(value);
  int64_t l = q.size(0), n = q.size(1), s = k.size(0);
  WEFT_CHECK(q.size(2) == e, Shape, "nn::MultiheadAttention: query ", shapeString(query.sizes()),
             " does not end in embed_dim = ", e);
  WEFT_CHECK(k.size(1) == n && v.size(1) == n && v.size(0) == s, Shape,
             "nn::MultiheadAttention: key ", shapeString(key.sizes()), " and value ",
             shapeString(value.sizes()), " do not match the query's batch and each other");

  auto part = [&](int64_t i) {
    return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * e, e) : Tensor();
  };
  if (in_proj_weight.defined()) {
    q = functional::linear(q, in_proj_weight.narrow(0, 0, e), part(0));
    k = functional::linear(k, in_proj_weight.narrow(0, e, e), part(1));
    v = functional::linear(v, in_proj_weight.narrow(0, 2 * e, e), part(2));
  } else {
    q = functional::linear(q, q_proj_weight, part(0));
    k = functional::linear(k, k_proj_weight, part(1));
    v = functional::linear(v, v_proj_weight, part(2));
  }
  // (seq, batch, E) -> (batch, heads, seq, head_dim)
  auto splitHeads = [&](const Tensor& t, int64_t len) {
    return t.reshape({len, n, heads, hd}).permute({1, 2, 0, 3});
  };
  q = splitHeads(q, l);
  k = splitHeads(k, s);
  v = splitHeads(v, s);
  Tensor scores = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));

  if (attnMask.defined()) {
    Shape two{l, s}, three{n * heads, l, s};
    WEFT_CHECK(attnMask.sizes() == two || attnMask.sizes() == three, Shape,
               "nn::MultiheadAttention: attn_mask must be ", shapeString(two), " or ",
               shapeString(three), ", got ", shapeString(attnMask.sizes()));
    scores = applyMask(scores, attnMask.dim() == 2 ? attnMask : attnMask.reshape({n, heads, l, s}));
  } else if (isCausal) { // position i attends to keys 0..i
    scores = scores.masked_fill(
        ones({l, s}, TensorOptions(kBool).device(scores.device())).triu(1), -kInf);
  }
  if (keyPaddingMask.defined()) {
    Shape expected = batched ? Shape{n, s} : Shape{s};
    WEFT_CHECK(keyPaddingMask.sizes() == expected, Shape,
               "nn::MultiheadAttention: key_padding_mask must be ", shapeString(expected), ", got ",
               shapeString(keyPaddingMask.sizes()));
    scores = applyMask(scores, keyPaddingMask.reshape({n, 1, 1, s}));
  }
  Tensor attn = scores.softmax(-1);
  if (options.dropout() > 0 && is_training())
    attn = functional::dropout(attn, options.dropout(), true);
  // (batch, heads, L, head_dim) -> (L, batch, E)
  Tensor out = attn.matmul(v).permute({2, 0, 1, 3}).reshape({l, n, e});
  out = out_proj(out);
  out = !batched ? out.squeeze(1) : options.batch_first() ? out.transpose(0, 1) : out;
  if (!needWeights) return {out, Tensor()};
  if (averageWeights) attn = attn.mean({1});
  return {out, batched ? attn : attn.squeeze(0)};
}

namespace {

/// linear2(dropout(activation(linear1(x)))).
Tensor feedForwardBlock(const TransformerLayerOptions& o, Linear& linear1, Dropout& dropout,
                        Linear& linear2, const Tensor& x) {
  Tensor h = linear1(x);
  h = o.activation() == "gelu" ? gelu(h) : relu(h);
  return linear2(dropout(h));
}

/// Registers the feed-forward block's modules under PyTorch's names, in its order.
void registerFeedForward(Module& layer, const TransformerLayerOptions& o, Linear& linear1,
                         Dropout& dropout, Linear& linear2) {
  linear1 = layer.register_module("linear1", Linear(o.d_model(), o.dim_feedforward()));
  dropout = layer.register_module("dropout", Dropout(o.dropout()));
  linear2 = layer.register_module("linear2", Linear(o.dim_feedforward(), o.d_model()));
}

void checkLayerOptions(const TransformerLayerOptions& o, const char* name) {
  WEFT_CHECK(o.activation() == "relu" || o.activation() == "gelu", Value, "nn::", name,
             ": activation must be \"relu\" or \"gelu\", got \"", o.activation(), "\"");
  WEFT_CHECK(o.dim_feedforward() > 0, Value, "nn::", name,
             ": dim_feedforward must be positive, got ", o.dim_feedforward());
}

MultiheadAttentionOptions attentionOptions(const TransformerLayerOptions& o) {
  return MultiheadAttentionOptions(o.d_model(), o.nhead())
      .dropout(o.dropout())
      .batch_first(o.batch_first());
}

} // namespace

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
    : options(o) {
  checkLayerOptions(o, "TransformerEncoderLayer");
  self_attn = register_module("self_attn", MultiheadAttention(attentionOptions(o)));
  registerFeedForward(*this, o, linear1, dropout, linear2);
  LayerNormOptions norm = LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps());
  norm1 = register_module("norm1", LayerNorm(norm));
  norm2 = register_module("norm2", LayerNorm(norm));
  dropout1 = register_module("dropout1", Dropout(o.dropout()));
  dropout2 = register_module("dropout2", Dropout(o.dropout()));
}

Tensor TransformerEncoderLayerImpl::feedForward(const Tensor& x) {
  return dropout2(feedForwardBlock(options, linear1, dropout, linear2, x));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& mask,
                                            const Tensor& keyPaddingMask, bool isCausal,
                                            std::source_location loc) {
  CallSite cs(loc);
  auto selfAttention = [&](const Tensor& x) {
    return dropout1(std::get<0>(self_attn(x, x, x, keyPaddingMask, false, mask, true, isCausal)));
  };
  Tensor x = src;
  if (options.norm_first()) {
    x = x + selfAttention(norm1(x));
    return x + feedForward(norm2(x));
  }
  x = norm1(x + selfAttention(x));
  return norm2(x + feedForward(x));
}

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& o)
    : options(o) {
  checkLayerOptions(o, "TransformerDecoderLayer");
  self_attn = register_module("self_attn", MultiheadAttention(attentionOptions(o)));
  multihead_attn = register_module("multihead_attn", MultiheadAttention(attentionOptions(o)));
  registerFeedForward(*this, o, linear1, dropout, linear2);
  LayerNormOptions norm = LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps());
  norm1 = register_module("norm1", LayerNorm(norm));
  norm2 = register_module("norm2", LayerNorm(norm));
  norm3 = register_module("norm3", LayerNorm(norm));
  dropout1 = register_module("dropout1", Dropout(o.dropout()));
  dropout2 = register_module("dropout2", Dropout(o.dropout()));
  dropout3 = register_module("dropout3", Dropout(o.dropout()));
}

Tensor TransformerDecoderLayerImpl::feedForward(const Tensor& x) {
  return dropout3(feedForwardBlock(options, linear1, dropout, linear2, x));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory,
                                            const Tensor& tgtMask, const Tensor& memoryMask,
                                            const Tensor& tgtKeyPaddingMask,
                                            const Tensor& memoryKeyPaddingMask, bool tgtIsCausal,
                                            bool memoryIsCausal, std::source_location loc) {
  CallSite cs(loc);
  auto selfAttention = [&](const Tensor& x) {
    return dropout1(
        std::get<0>(self_attn(x, x, x, tgtKeyPaddingMask, false, tgtMask, true, tgtIsCausal)));
  };
  auto crossAttention = [&](const Tensor& x) {
    return dropout2(std::get<0>(multihead_attn(x, memory, memory, memoryKeyPaddingMask, false,
                                               memoryMask, true, memoryIsCausal)));
  };
  Tensor x = tgt;
  if (options.norm_first()) {
    x = x + selfAttention(norm1(x));
    x = x + crossAttention(norm2(x));
    return x + feedForward(norm3(x));
  }
  x = norm1(x + selfAttention(x));
  x = norm2(x + crossAttention(x));
  return norm3(x + feedForward(x));
}

} // namespace weft::nn
