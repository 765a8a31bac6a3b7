#include "runtime/emulator/model.h"

#include <map>

#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/counter_rng.h"

namespace ipu::emu {

namespace {

Error modelError(const ir::SourceRef& where, const std::string& message, const std::string& help) {
  return Error{code::kUnsupportedModel, message, help, where};
}

double attr(const ir::Layer& l, const char* key) {
  for (const auto& a : l.attributes)
    if (a.name == key && a.text.empty()) return a.number;
  return -1;
}

}  // namespace

int Model::findParam(const std::string& name) const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return static_cast<int>(i);
  return -1;
}

double Model::parameterCount() const {
  double n = 0;
  for (const auto& p : params_) n += static_cast<double>(p.spec.rows * p.spec.cols);
  return n;
}

Expected<std::shared_ptr<const Model>> Model::build(const ir::PhasePlan& phase) {
  auto model = std::make_shared<Model>();
  Model& m = *model;
  m.shards_ = std::max(1, phase.mapping.shard);
  if (phase.layers.empty()) return modelError(phase.source, "phase `" + phase.name + "` has no layers", "");
  // A ViT's sequences are its images' patches and the class token.
  long long seqLen = phase.seqLen;
  if (const ir::Layer& in = phase.layers.front(); in.op == ir::LayerOp::PatchEmbedding) {
    const long long patch = static_cast<long long>(attr(in, "patch"));
    const long long side = phase.imageSize > 0 ? phase.imageSize : static_cast<long long>(attr(in, "image"));
    if (patch > 0 && side % patch == 0) seqLen = (side / patch) * (side / patch) + 1;
    m.imageTokens_ = static_cast<int>(seqLen);
  }
  std::map<std::string, int> byName;
  for (std::size_t i = 0; i < phase.layers.size(); ++i) {
    const ir::Layer& l = phase.layers[i];
    auto kernel = makeKernel(l, m.shards_, seqLen);
    if (!kernel) return kernel.error();
    ModelLayer ml;
    ml.plan = &l;
    ml.kernel = std::move(kernel.value());
    ml.head = ml.kernel->isHead();
    ml.stage = l.stage;
    ml.ipu = l.ipu;
    ml.specs = ml.kernel->params();
    for (const auto& spec : ml.specs) {
      if (!spec.tiedTo.empty()) {
        const int id = m.findParam(spec.tiedTo);
        if (id < 0)
          return Error{code::kUnsupportedLayer,
                       "layer `" + l.name + "` is tied to `" + spec.tiedTo + "`, which no earlier embedding layer declares",
                       "tie the head to the model's embedding layer", l.source};
        const auto& owner = m.params_[static_cast<std::size_t>(id)].spec;
        if (owner.rows != spec.rows || owner.cols != spec.cols)
          return Error{code::kUnsupportedLayer,
                       "layer `" + l.name + "` shares `" + spec.tiedTo + "` but its vocab/hidden differ from the embedding's",
                       "give the head the embedding's vocab and hidden", l.source};
        ml.params.push_back(id);
        continue;
      }
      ModelParam p;
      p.name = l.name + "." + spec.name;
      p.spec = spec;
      p.owner = static_cast<int>(i);
      ml.params.push_back(static_cast<int>(m.params_.size()));
      m.params_.push_back(std::move(p));
    }
    byName[l.name] = static_cast<int>(i);
    m.layers_.push_back(std::move(ml));
  }

  // The family decides the data: BERT (MLM, NSP), GPT (next token) or an MLP on features.
  const ir::Layer& first = phase.layers.front();
  bool hasMlm = false, hasLm = false, hasSoftmax = false;
  for (const auto& l : phase.layers) {
    hasMlm |= l.op == ir::LayerOp::MlmHead;
    hasLm |= l.op == ir::LayerOp::LmHead;
    m.hasNsp_ |= l.op == ir::LayerOp::PooledClassifier;
    hasSoftmax |= l.op == ir::LayerOp::SoftmaxLoss;
    if (&l != &first && l.op == ir::LayerOp::Embedding)
      return modelError(l.source, "layer `" + l.name + "` is an embedding after the first layer",
                        "the emulator feeds tokens to the first layer only");
  }
  if (!m.layers_.back().head)
    return modelError(phase.layers.back().source, "the model's last layer `" + phase.layers.back().name + "` produces no loss",
                      "end the model with a loss layer (mlm_head, pooled_classifier, lm_head or softmax_loss)");
  int hidden = -1;
  if (first.op == ir::LayerOp::Embedding) {
    m.vocab_ = static_cast<int>(attr(first, "vocab"));
    hidden = static_cast<int>(attr(first, "hidden"));
    if (hasMlm && hasLm)
      return modelError(first.source, "the model has both an MLM and an LM head", "the emulator trains one of BERT or GPT");
    if (!hasMlm && !hasLm && !m.hasNsp_)
      return modelError(first.source, "the model has an embedding but no language-model or NSP head",
                        "add an mlm_head or lm_head");
    m.family_ = hasLm ? Family::Gpt : Family::Bert;
    if (hasSoftmax) return modelError(first.source, "softmax_loss after an embedding has no data to classify", "");
  } else if (first.op == ir::LayerOp::ConvStem) {
    m.family_ = Family::Image;
    m.imageChannels_ = static_cast<int>(attr(first, "channels"));
    m.imageSize_ = static_cast<int>(attr(first, "size"));
    m.features_ = m.imageChannels_ * m.imageSize_ * m.imageSize_;
    if (phase.imageSize > 0 && static_cast<long long>(m.imageSize_) != phase.imageSize)
      return modelError(first.source, "the stem `" + first.name + "` takes images of side " + std::to_string(m.imageSize_) +
                                          " but the phase's image_size is " + std::to_string(phase.imageSize),
                        "give the stem `size: image_size`");
    bool hasPooledFc = false;
    for (const auto& l : phase.layers) hasPooledFc |= l.op == ir::LayerOp::PooledFc;
    if (!hasPooledFc) return modelError(first.source, "an image model needs a pooled_fc classifier", "end the model with pooled_fc(...)");
  } else if (first.op == ir::LayerOp::PatchEmbedding) {
    // A ViT: the same images as a ResNet, cut into patches (makeKernel has
    // checked that `image` is the phase's image_size and the patch tiles it).
    m.family_ = Family::Image;
    m.imageChannels_ = static_cast<int>(attr(first, "channels"));
    m.imageSize_ = static_cast<int>(attr(first, "image"));
    m.features_ = m.imageChannels_ * m.imageSize_ * m.imageSize_;
    hidden = static_cast<int>(attr(first, "hidden"));
    bool hasTokenClassifier = false;
    for (const auto& l : phase.layers) hasTokenClassifier |= l.op == ir::LayerOp::TokenClassifier;
    if (!hasTokenClassifier)
      return modelError(first.source, "a ViT needs a token_classifier head", "end the model with token_classifier(...)");
  } else if (first.op == ir::LayerOp::Dense) {
    m.family_ = Family::Mlp;
    m.features_ = static_cast<int>(attr(first, "inputs"));
    if (!hasSoftmax) return modelError(first.source, "an MLP needs a softmax_loss layer", "end the model with softmax_loss(classes: ...)");
  } else {
    return modelError(first.source, "the first layer `" + first.name + "` is a `" + ir::opName(first) + "`",
                      "the emulator's first layer reads the data: an embedding (tokens), a dense layer (features), a "
                      "conv_stem or a patch_embedding (images)");
  }
  // Widths along the trunk must match.
  int width = m.family_ == Family::Mlp || m.family_ == Family::Image ? m.features_ : hidden;
  for (std::size_t i = 0; i < phase.layers.size(); ++i) {
    const ir::Layer& l = phase.layers[i];
    int in = -1, out = -1;
    switch (l.op) {
      case ir::LayerOp::Attention:
      case ir::LayerOp::Ffn:
      case ir::LayerOp::MlmHead:
      case ir::LayerOp::LmHead:
      case ir::LayerOp::PooledClassifier:
      case ir::LayerOp::ConvModule:
      case ir::LayerOp::GroupedFfn:
      case ir::LayerOp::LayerNorm:
      case ir::LayerOp::TokenClassifier:
        in = out = static_cast<int>(attr(l, "hidden"));
        if (l.op == ir::LayerOp::TokenClassifier) m.classes_ = static_cast<int>(attr(l, "classes"));
        break;
      case ir::LayerOp::PatchEmbedding:
        if (&l != &first)
          return modelError(l.source, "layer `" + l.name + "` is a patch_embedding after the first layer",
                            "the emulator feeds images to the first layer only");
        in = m.features_;
        out = static_cast<int>(attr(l, "hidden"));
        break;
      case ir::LayerOp::Dense:
        in = static_cast<int>(attr(l, "inputs"));
        out = static_cast<int>(attr(l, "outputs"));
        break;
      case ir::LayerOp::SoftmaxLoss:
        in = out = static_cast<int>(attr(l, "classes"));
        m.classes_ = in;
        break;
      case ir::LayerOp::Embedding: continue;  // it sets the width
      case ir::LayerOp::ConvStem:
      case ir::LayerOp::Bottleneck:
      case ir::LayerOp::BasicBlock:
      case ir::LayerOp::PooledFc: {
        // Widths are C*H*W; makeKernel has checked the attributes.
        ImageWidths w;
        if (!imageWidths(l, w) || m.family_ != Family::Image)
          return modelError(l.source, "layer `" + l.name + "` is a `" + ir::opName(l) + "` in a model that does not start with a conv_stem",
                            "convolutional layers read images: start the model with conv_stem(...)");
        in = static_cast<int>(w.in);
        out = static_cast<int>(w.out);
        if (l.op == ir::LayerOp::PooledFc) m.classes_ = w.classes;
        break;
      }
      // Ops without a kernel never reach a model (hasKernel).
      case ir::LayerOp::Other: continue;
    }
    if (in != width)
      return modelError(l.source, "layer `" + l.name + "` expects width " + std::to_string(in) + " but receives " + std::to_string(width),
                        m.family_ == Family::Image ? "widths are channels x side x side: make each layer's inputs and size agree with the "
                                                     "previous layer's output"
                                                   : "make consecutive layers' sizes agree");
    if (!m.layers_[i].head) width = out;
    if ((l.op == ir::LayerOp::MlmHead || l.op == ir::LayerOp::LmHead) && static_cast<int>(attr(l, "vocab")) != m.vocab_)
      return modelError(l.source, "layer `" + l.name + "` has a vocab different from the embedding's", "");
  }
  return std::shared_ptr<const Model>(model);
}

std::vector<Mat> Model::initialValues(std::uint64_t seed) const {
  std::vector<Mat> out;
  out.reserve(params_.size());
  for (const auto& p : params_) {
    Mat v(p.spec.rows, p.spec.cols);
    if (p.spec.initStd > 0) {
      Stream s(subKey(seed, hashName(p.name)));
      for (Eigen::Index i = 0; i < v.size(); ++i) v.data()[i] = static_cast<float>(s.normal() * p.spec.initStd);
    } else {
      v.setConstant(p.spec.initValue);
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ipu::emu
