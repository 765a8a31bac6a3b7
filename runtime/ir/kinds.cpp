#include "runtime/ir/kinds.h"

#include <cstddef>

namespace ipu::ir {

namespace {

// Every list names each enumerator once, in declaration order.
template <class E, std::size_t N>
constexpr bool complete(const E (&all)[N], E last) {
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<std::size_t>(all[i]) != i) return false;
  return static_cast<std::size_t>(last) + 1 == N;
}
static_assert(complete(kLayerOps, LayerOp::Other));
static_assert(complete(kPipelineKinds, PipelineKind::Lua));
static_assert(complete(kLossScaleKinds, LossScaleKind::Lua));
static_assert(complete(kOptimizerKinds, OptimizerKind::Lars));
static_assert(complete(kParamClasses, ParamClass::Embedding));
static_assert(complete(kLrDecays, LrDecay::Exponential));
static_assert(complete(kDatasetKinds, DatasetKind::Files));
static_assert(complete(kDerivedBatches, DerivedBatch::GlobalBatch));
static_assert(complete(kActivations, Activation::None));
static_assert(complete(kNormPositions, NormPosition::Post));

template <class E, std::size_t N>
std::optional<E> fromName(const E (&all)[N], std::string_view name) {
  for (E e : all)
    if (name == nameOf(e)) return e;
  return std::nullopt;
}

}  // namespace

// The switches have no default: the compiler reports an enumerator without a name.

const char* nameOf(LayerOp op) {
  switch (op) {
    case LayerOp::Embedding: return "embedding";
    case LayerOp::Attention: return "attention";
    case LayerOp::Ffn: return "ffn";
    case LayerOp::MlmHead: return "mlm_head";
    case LayerOp::PooledClassifier: return "pooled_classifier";
    case LayerOp::LmHead: return "lm_head";
    case LayerOp::Dense: return "dense";
    case LayerOp::SoftmaxLoss: return "softmax_loss";
    case LayerOp::ConvStem: return "conv_stem";
    case LayerOp::Bottleneck: return "bottleneck";
    case LayerOp::BasicBlock: return "basic_block";
    case LayerOp::PooledFc: return "pooled_fc";
    case LayerOp::PatchEmbedding: return "patch_embedding";
    case LayerOp::TokenClassifier: return "token_classifier";
    case LayerOp::ConvModule: return "conv_module";
    case LayerOp::GroupedFfn: return "grouped_ffn";
    case LayerOp::LayerNorm: return "layer_norm";
    case LayerOp::Other: return "other";
  }
  return "other";
}

std::optional<LayerOp> layerOpFromName(std::string_view name) {
  std::optional<LayerOp> op = fromName(kLayerOps, name);
  if (op == LayerOp::Other) return std::nullopt;
  return op;
}

const char* nameOf(PipelineKind k) {
  switch (k) {
    case PipelineKind::Single: return "single";
    case PipelineKind::Explicit: return "explicit";
    case PipelineKind::Balanced: return "balanced";
    case PipelineKind::Lua: return "lua";
  }
  return "single";
}
std::optional<PipelineKind> pipelineKindFromName(std::string_view name) { return fromName(kPipelineKinds, name); }

const char* nameOf(LossScaleKind k) {
  switch (k) {
    case LossScaleKind::None: return "none";
    case LossScaleKind::Static: return "static";
    case LossScaleKind::Dynamic: return "dynamic";
    case LossScaleKind::Lua: return "lua";
  }
  return "none";
}
std::optional<LossScaleKind> lossScaleKindFromName(std::string_view name) { return fromName(kLossScaleKinds, name); }

const char* nameOf(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Momentum: return "momentum";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::Lamb: return "lamb";
    case OptimizerKind::Lars: return "lars";
  }
  return "sgd";
}
std::optional<OptimizerKind> optimizerKindFromName(std::string_view name) { return fromName(kOptimizerKinds, name); }

const char* nameOf(ParamClass c) {
  switch (c) {
    case ParamClass::Weight: return "weight";
    case ParamClass::Bias: return "bias";
    case ParamClass::Norm: return "norm";
    case ParamClass::Embedding: return "embedding";
  }
  return "weight";
}
std::optional<ParamClass> paramClassFromName(std::string_view name) { return fromName(kParamClasses, name); }

const char* nameOf(LrDecay d) {
  switch (d) {
    case LrDecay::Constant: return "constant";
    case LrDecay::Linear: return "linear";
    case LrDecay::Cosine: return "cosine";
    case LrDecay::Poly: return "poly";
    case LrDecay::Exponential: return "exponential";
  }
  return "constant";
}
std::optional<LrDecay> lrDecayFromName(std::string_view name) { return fromName(kLrDecays, name); }

const char* nameOf(DatasetKind k) {
  switch (k) {
    case DatasetKind::Synthetic: return "synthetic";
    case DatasetKind::Text: return "text";
    case DatasetKind::Files: return "files";
  }
  return "synthetic";
}
std::optional<DatasetKind> datasetKindFromName(std::string_view name) { return fromName(kDatasetKinds, name); }

const char* nameOf(DerivedBatch d) {
  switch (d) {
    case DerivedBatch::None: return "none";
    case DerivedBatch::MicroBatch: return "micro_batch";
    case DerivedBatch::GradientAccumulation: return "gradient_accumulation";
    case DerivedBatch::GlobalBatch: return "global_batch";
  }
  return "none";
}
std::optional<DerivedBatch> derivedBatchFromName(std::string_view name) { return fromName(kDerivedBatches, name); }

const char* nameOf(Activation a) {
  switch (a) {
    case Activation::Gelu: return "gelu";
    case Activation::Relu: return "relu";
    case Activation::Tanh: return "tanh";
    case Activation::None: return "none";
  }
  return "none";
}
std::optional<Activation> activationFromName(std::string_view name) {
  if (name == "linear" || name == "identity") return Activation::None;
  return fromName(kActivations, name);
}

const char* nameOf(NormPosition n) {
  switch (n) {
    case NormPosition::Pre: return "pre";
    case NormPosition::Post: return "post";
  }
  return "pre";
}
std::optional<NormPosition> normPositionFromName(std::string_view name) { return fromName(kNormPositions, name); }

}  // namespace ipu::ir
