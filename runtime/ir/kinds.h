// The closed sets of kinds the plan is made of, as enums with their names.
// The names are the plan's vocabulary: the script writes them, the JSON
// documents (plan --json, estimate --json, run directories, checkpoint meta)
// print them, and the plan's content hash is over them, so each name is
// spelled once, here, and code compares enumerators, not strings.
//
// For every enum X: nameOf(X) gives its name, xFromName(name) the enumerator
// (nullopt for a name it does not know, so a reader reports it instead of
// guessing), and kXs lists every enumerator in declaration order (a
// static_assert in kinds.cpp keeps the list complete).
#pragma once

#include <optional>
#include <string_view>

namespace ipu::ir {

// The `op` of a layer definition. The standard library's ops are known by
// name; a user's layer may name any op (its costs are formulas, no backend
// computes it): that is LayerOp::Other, with the name kept in the layer.
enum class LayerOp {
  Embedding, Attention, Ffn, MlmHead, PooledClassifier, LmHead, Dense, SoftmaxLoss,
  ConvStem, Bottleneck, PooledFc, PatchEmbedding, TokenClassifier, ConvModule, GroupedFfn, LayerNorm,
  BasicBlock,
  Other,
};
inline constexpr LayerOp kLayerOps[] = {
    LayerOp::Embedding,  LayerOp::Attention,  LayerOp::Ffn,        LayerOp::MlmHead,
    LayerOp::PooledClassifier, LayerOp::LmHead, LayerOp::Dense,    LayerOp::SoftmaxLoss,
    LayerOp::ConvStem,   LayerOp::Bottleneck, LayerOp::PooledFc,   LayerOp::PatchEmbedding,
    LayerOp::TokenClassifier, LayerOp::ConvModule, LayerOp::GroupedFfn, LayerOp::LayerNorm, LayerOp::BasicBlock,
    LayerOp::Other};
// "other" for Other, which has no name of its own: layerOpFromName never
// returns Other, so a user's op spelled "other" stays a user's op.
const char* nameOf(LayerOp op);
std::optional<LayerOp> layerOpFromName(std::string_view name);

// How a mapping places layers on the pipeline's IPUs.
enum class PipelineKind { Single, Explicit, Balanced, Lua };
inline constexpr PipelineKind kPipelineKinds[] = {PipelineKind::Single, PipelineKind::Explicit,
                                                  PipelineKind::Balanced, PipelineKind::Lua};
const char* nameOf(PipelineKind k);
std::optional<PipelineKind> pipelineKindFromName(std::string_view name);

// `loss_scale`: 1 (none), another number (static), `dynamic`, or a Lua policy.
enum class LossScaleKind { None, Static, Dynamic, Lua };
inline constexpr LossScaleKind kLossScaleKinds[] = {LossScaleKind::None, LossScaleKind::Static,
                                                    LossScaleKind::Dynamic, LossScaleKind::Lua};
const char* nameOf(LossScaleKind k);
std::optional<LossScaleKind> lossScaleKindFromName(std::string_view name);

enum class OptimizerKind { Sgd, Momentum, Adam, AdamW, Lamb, Lars };
inline constexpr OptimizerKind kOptimizerKinds[] = {OptimizerKind::Sgd,   OptimizerKind::Momentum,
                                                    OptimizerKind::Adam,  OptimizerKind::AdamW,
                                                    OptimizerKind::Lamb,  OptimizerKind::Lars};
const char* nameOf(OptimizerKind k);
std::optional<OptimizerKind> optimizerKindFromName(std::string_view name);

// The parameter classes an optimizer's `exclude` list names (no weight decay,
// no trust ratio). Weight is every parameter of no other class.
enum class ParamClass { Weight, Bias, Norm, Embedding };
inline constexpr ParamClass kParamClasses[] = {ParamClass::Weight, ParamClass::Bias, ParamClass::Norm,
                                               ParamClass::Embedding};
const char* nameOf(ParamClass c);
std::optional<ParamClass> paramClassFromName(std::string_view name);

// The learning rate's decay after warmup (`then cosine to 0`).
enum class LrDecay { Constant, Linear, Cosine, Poly, Exponential };
inline constexpr LrDecay kLrDecays[] = {LrDecay::Constant, LrDecay::Linear, LrDecay::Cosine, LrDecay::Poly,
                                        LrDecay::Exponential};
const char* nameOf(LrDecay d);
std::optional<LrDecay> lrDecayFromName(std::string_view name);

// Where a dataset's samples come from.
enum class DatasetKind { Synthetic, Text, Files };
inline constexpr DatasetKind kDatasetKinds[] = {DatasetKind::Synthetic, DatasetKind::Text, DatasetKind::Files};
const char* nameOf(DatasetKind k);
std::optional<DatasetKind> datasetKindFromName(std::string_view name);

// Which of micro_batch, gradient_accumulation and global_batch the planner
// derived from the other two (None: all three were given).
enum class DerivedBatch { None, MicroBatch, GradientAccumulation, GlobalBatch };
inline constexpr DerivedBatch kDerivedBatches[] = {DerivedBatch::None, DerivedBatch::MicroBatch,
                                                   DerivedBatch::GradientAccumulation, DerivedBatch::GlobalBatch};
const char* nameOf(DerivedBatch d);
std::optional<DerivedBatch> derivedBatchFromName(std::string_view name);

// The activation of a `dense` layer (its `activation` argument). "linear" and
// "identity" are read as other spellings of "none".
enum class Activation { Gelu, Relu, Tanh, None };
inline constexpr Activation kActivations[] = {Activation::Gelu, Activation::Relu, Activation::Tanh, Activation::None};
const char* nameOf(Activation a);
std::optional<Activation> activationFromName(std::string_view name);

// Where a transformer block normalises (its `norm` argument).
enum class NormPosition { Pre, Post };
inline constexpr NormPosition kNormPositions[] = {NormPosition::Pre, NormPosition::Post};
const char* nameOf(NormPosition n);
std::optional<NormPosition> normPositionFromName(std::string_view name);

}  // namespace ipu::ir
