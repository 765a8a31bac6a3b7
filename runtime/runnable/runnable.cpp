#include "runtime/runnable/runnable.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ipu::runnable {

namespace {

using ir::LayerOp;

const char* const kArguments = "check the layer's arguments";
const char* const kSeqLenHelp = "the emulator feeds sequences of the phase's seq_len";
const char* const kImageHelp =
    "the emulator runs square images of a whole side; check the layer's arguments and the phase's image_size";

Requirement positive(std::vector<const char*> keys) {
  return {Check::Positive, std::move(keys), "attribute `{key}` must be a positive whole number", kArguments};
}
Requirement imageSizes(std::vector<const char*> keys) {
  return {Check::ImageSize, std::move(keys), "attribute `{key}` must be a whole number from 1 to 10,000,000", kImageHelp};
}
// The transformer kernels name the phase's seq_len; GroupBERT's and ViT's
// say how many tokens its sequences have.
Requirement seqIsSeqLen() {
  return {Check::SequenceLength, {"seq"}, "its `seq` is {seq} but the phase's seq_len is {seq_len}", kSeqLenHelp};
}
Requirement seqIsTokens(const char* help) {
  return {Check::SequenceLength, {"seq"}, "its `seq` is {seq} but the phase's sequences have {seq_len} tokens", help};
}
Requirement prePost() {
  return {Check::OneOf, {"norm"}, "`norm` is \"{text}\"", "use \"pre\" or \"post\"", {"pre", "post"}, "post"};
}
Requirement imageActivations() {
  // Every trunk tensor holds N rows of C*H*W floats; a sample's row stays
  // within what an index in float (the max pool's argmax) represents exactly.
  return {Check::ImageActivations, {}, "one sample's activations exceed 16,777,216 values",
          "`ipu run` emulates small models: use smaller images or fewer channels"};
}
Requirement batchOrGroup() {
  return {Check::OneOf, {"norm"}, "`norm` is \"{text}\"", "use \"batch\" or \"group\"", {"batch", "group"}, "batch"};
}
Requirement normGroups() {
  return {Check::NormGroups, {"norm_groups"}, "`norm_groups` must be a whole positive number", "e.g. norm_groups: 32"};
}
Requirement normGroupsDivide(std::vector<const char*> keys) {
  return {Check::NormGroupsDivide, std::move(keys), "{norm_groups} groups do not divide {channels} channels",
          "choose `norm_groups` dividing every convolution's output channels"};
}

std::vector<KernelRow> makeTable() {
  const Requirement tied{Check::Tied, {}, "its projection is not tied to an embedding", "pass `tie: embedding`"};
  return {
      {LayerOp::Embedding, "word, position and segment embeddings, summed and layer-normalised", false,
       {positive({"vocab", "hidden", "positions"}), seqIsSeqLen(),
        {Check::CoversSequence, {"positions"}, "it has {positions} positions, fewer than the phase's seq_len {seq_len}",
         "raise `positions` or shorten the phase's seq_len"},
        {Check::AtLeast, {"vocab"}, "a vocabulary of fewer than 16 tokens cannot hold the special tokens and text",
         "raise `vocab`", {}, "", 16}}},
      {LayerOp::Attention, "multi-head self-attention (causal or not, pre- or post-norm), split by heads over a shard", false,
       {positive({"hidden", "heads"}), seqIsSeqLen(),
        {Check::Divides, {"heads", "hidden"}, "{heads} heads do not divide hidden {hidden}", "choose heads dividing hidden"},
        prePost(),
        {Check::SplitsOverShard, {"heads"}, "{heads} heads cannot be split over shard: {shard}",
         "tensor sharding splits attention by heads: use a shard count that divides the heads"}}},
      {LayerOp::Ffn, "a GELU feed-forward block (pre- or post-norm), split by intermediate units over a shard", false,
       {positive({"hidden", "intermediate"}), prePost(),
        {Check::SplitsOverShard, {"intermediate"}, "intermediate {intermediate} cannot be split over shard: {shard}",
         "tensor sharding splits the FFN's intermediate units: use a shard count that divides them"}}},
      {LayerOp::MlmHead, "BERT's masked-token prediction, on the embedding's tied word matrix", true,
       {positive({"hidden", "vocab"}), tied}},
      {LayerOp::PooledClassifier, "BERT's next-sentence classifier on the pooled first token", true,
       {positive({"hidden", "classes"})}},
      {LayerOp::LmHead, "GPT's next-token prediction, on the embedding's tied word matrix", true,
       {positive({"hidden", "vocab"}), tied}},
      {LayerOp::Dense, "a fully connected layer with a GELU, ReLU, tanh or no activation", false,
       {positive({"inputs", "outputs"}),
        {Check::OneOf, {"activation"}, "activation \"{text}\" has no kernel", "use \"gelu\", \"relu\", \"tanh\" or \"none\"",
         {"gelu", "relu", "tanh", "none"}, "gelu"}}},
      {LayerOp::SoftmaxLoss, "softmax cross-entropy over the classes", true, {positive({"classes"})}},
      {LayerOp::ConvModule, "GroupBERT's convolution module (grouped convolution along the sequence)", false,
       {positive({"hidden", "kernel", "groups"}), seqIsTokens(kSeqLenHelp),
        {Check::Divides, {"groups", "hidden"}, "{groups} groups do not divide hidden {hidden}", "choose groups dividing hidden"}}},
      {LayerOp::GroupedFfn, "GroupBERT's grouped feed-forward block, split by groups over a shard", false,
       {positive({"hidden", "intermediate", "groups"}), seqIsTokens(kSeqLenHelp),
        {Check::Divides, {"groups", "hidden", "intermediate"},
         "{groups} groups do not divide hidden {hidden} and intermediate {intermediate}", "choose groups dividing both"},
        {Check::SplitsOverShard, {"groups"}, "{groups} groups cannot be split over shard: {shard}",
         "tensor sharding splits a grouped FFN by groups: use a shard count that divides them"}}},
      {LayerOp::LayerNorm, "layer normalisation", false, {positive({"hidden"})}},
      {LayerOp::ConvStem, "ResNet's stem: a 7x7 convolution, normalisation, ReLU and a 3x3 max pool", false,
       {imageSizes({"channels", "out", "size"}), imageActivations(), batchOrGroup(), normGroups(),
        {Check::AtLeast, {"size"}, "the stem needs images of at least 4 pixels a side", "raise the phase's image_size", {},
         "", 4},
        normGroupsDivide({"out"})}},
      {LayerOp::Bottleneck, "ResNet's bottleneck block (1x1, 3x3, 1x1 convolutions and the shortcut)", false,
       {imageSizes({"inputs", "mid", "out", "stride", "size"}), imageActivations(), batchOrGroup(), normGroups(),
        normGroupsDivide({"mid", "out"})}},
      {LayerOp::BasicBlock, "ResNet's basic block (two 3x3 convolutions and the shortcut)", false,
       {imageSizes({"inputs", "out", "stride", "size"}), imageActivations(), batchOrGroup(), normGroups(),
        normGroupsDivide({"out"})}},
      {LayerOp::PooledFc, "global average pooling, a fully connected classifier and its softmax loss", true,
       {imageSizes({"inputs", "classes", "size"}), imageActivations()}},
      {LayerOp::PatchEmbedding, "ViT's patch embedding, class token and positions", false,
       {positive({"patch", "channels", "hidden", "image"}),
        {Check::Divides, {"patch", "image"}, "patches of {patch} pixels do not tile images of {image}",
         "choose a patch size dividing the image size"},
        {Check::PatchTokens, {}, "its images make {tokens} tokens but the phase's image_size makes {seq_len}",
         "the emulator feeds images of the phase's image_size: make `image` equal to it"}}},
      {LayerOp::TokenClassifier, "ViT's classifier on the class token and its softmax loss", true,
       {positive({"hidden", "classes"}), seqIsTokens("the emulator feeds images of the phase's image_size")}},
  };
}

bool positiveWhole(double v, double max) { return v >= 1 && v <= max && v == std::floor(v); }

long long whole(const ir::Layer& l, const char* key) { return static_cast<long long>(number(l, key)); }

long long patchTokens(const ir::Layer& l) {
  const long long side = whole(l, "image") / whole(l, "patch");
  return side * side + 1;
}

// What a failed requirement fills its templates with.
struct Context {
  const ir::Layer& layer;
  long long seqLen = 0;
  int shard = 1;
  std::string key, text;
  long long channels = 0;
};

std::string fill(const char* pattern, const Context& c) {
  std::string out;
  for (const char* p = pattern; *p != '\0'; ++p) {
    const char* close = *p == '{' ? std::strchr(p, '}') : nullptr;
    if (close == nullptr) {
      out += *p;
      continue;
    }
    const std::string name(p + 1, close);
    if (name == "key") out += c.key;
    else if (name == "text") out += c.text;
    else if (name == "seq_len") out += std::to_string(c.seqLen);
    else if (name == "shard") out += std::to_string(c.shard);
    else if (name == "tokens") out += std::to_string(patchTokens(c.layer));
    else if (name == "norm_groups") out += std::to_string(static_cast<long long>(number(c.layer, "norm_groups", 32)));
    else if (name == "channels") out += std::to_string(c.channels);
    else out += std::to_string(whole(c.layer, name.c_str()));
    p = close;
  }
  return out;
}

bool groupNorm(const ir::Layer& l) { return text(l, "norm", "batch") == "group"; }

// Whether `l` meets `r`; on failure, what the message names goes into `c`.
bool meets(const Requirement& r, const ir::Layer& l, Context& c) {
  switch (r.check) {
    case Check::Positive:
    case Check::ImageSize:
      for (const char* k : r.keys)
        if (!positiveWhole(number(l, k), r.check == Check::Positive ? 1e8 : 1e7)) {
          c.key = k;
          return false;
        }
      return true;
    case Check::OneOf: {
      c.text = text(l, r.keys[0], r.fallback);
      return std::any_of(r.values.begin(), r.values.end(), [&](const char* v) { return c.text == v; });
    }
    case Check::Divides: {
      const long long d = whole(l, r.keys[0]);
      return std::all_of(r.keys.begin() + 1, r.keys.end(), [&](const char* k) { return whole(l, k) % d == 0; });
    }
    case Check::AtLeast: return number(l, r.keys[0]) >= r.limit;
    case Check::SequenceLength: {
      const double seq = number(l, r.keys[0]);
      return !(seq >= 0) || static_cast<long long>(seq) == c.seqLen;
    }
    case Check::CoversSequence: return number(l, r.keys[0]) >= static_cast<double>(c.seqLen);
    case Check::SplitsOverShard: return whole(l, r.keys[0]) % c.shard == 0;
    case Check::Tied: return !l.tiedTo.empty();
    case Check::ImageActivations: {
      ImageWidths w;
      imageWidths(l, w);
      return static_cast<double>(w.in) < 16777216.0 && static_cast<double>(w.out) < 16777216.0;
    }
    case Check::NormGroups: return !groupNorm(l) || positiveWhole(number(l, "norm_groups", 32), 1e7);
    case Check::NormGroupsDivide: {
      if (!groupNorm(l)) return true;
      const long long g = static_cast<long long>(number(l, "norm_groups", 32));
      for (const char* k : r.keys)
        if (whole(l, k) % g != 0) {
          c.channels = whole(l, k);
          return false;
        }
      return true;
    }
    case Check::PatchTokens: return patchTokens(l) == c.seqLen;
  }
  return false;
}

Problem layerFailure(const ir::Layer& l, const std::string& message, const std::string& help) {
  return Problem{code::kUnsupportedLayer, "layer `" + l.name + "`: " + message, help, l.source, Reach::Run};
}

Problem stackFailure(const ir::SourceRef& where, const std::string& message, const std::string& help) {
  return Problem{code::kUnsupportedModel, message, help, where, Reach::Run};
}

bool isHead(const ir::Layer& l) {
  const KernelRow* row = kernelFor(l.op);
  return row != nullptr && row->head;
}

}  // namespace

const std::vector<KernelRow>& kernels() {
  static const std::vector<KernelRow> table = makeTable();
  return table;
}

const KernelRow* kernelFor(ir::LayerOp op) {
  for (const auto& row : kernels())
    if (row.op == op) return &row;
  return nullptr;
}

std::string runnableOps() {
  std::string out;
  const auto& rows = kernels();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += i + 1 == rows.size() ? " and " : ", ";
    out += ir::nameOf(rows[i].op);
  }
  return out;
}

double number(const ir::Layer& l, const std::string& key, double fallback) {
  for (const auto& a : l.attributes)
    if (a.name == key) return a.text.empty() ? a.number : fallback;
  return fallback;
}

std::string text(const ir::Layer& l, const std::string& key, const std::string& fallback) {
  for (const auto& a : l.attributes)
    if (a.name == key && !a.text.empty()) return a.text;
  return fallback;
}

int convOutSize(int size, int k, int stride, int pad) { return (size + 2 * pad - k) / stride + 1; }

bool imageWidths(const ir::Layer& l, ImageWidths& out) {
  const KernelRow* row = kernelFor(l.op);
  if (row == nullptr || row->requirements.empty() || row->requirements.front().check != Check::ImageSize) return false;
  for (const char* k : row->requirements.front().keys)
    if (!positiveWhole(number(l, k), 1e7)) return false;
  const long long size = whole(l, "size");
  switch (l.op) {
    case LayerOp::ConvStem: {
      const long long o = convOutSize(convOutSize(static_cast<int>(size), 7, 2, 3), 3, 2, 1);
      out = {whole(l, "channels") * size * size, whole(l, "out") * o * o, 0};
      return true;
    }
    case LayerOp::Bottleneck:
    case LayerOp::BasicBlock: {
      const long long o = convOutSize(static_cast<int>(size), 3, static_cast<int>(whole(l, "stride")), 1);
      out = {whole(l, "inputs") * size * size, whole(l, "out") * o * o, 0};
      return true;
    }
    case LayerOp::PooledFc:
      out = {whole(l, "inputs") * size * size, whole(l, "classes"), static_cast<int>(whole(l, "classes"))};
      return true;
    default: return false;
  }
}

long long sequenceLength(const ir::PhasePlan& phase) {
  if (phase.layers.empty() || phase.layers.front().op != LayerOp::PatchEmbedding) return phase.seqLen;
  const ir::Layer& in = phase.layers.front();
  const long long patch = static_cast<long long>(number(in, "patch"));
  const long long side = phase.imageSize > 0 ? phase.imageSize : static_cast<long long>(number(in, "image"));
  if (patch > 0 && side % patch == 0) return (side / patch) * (side / patch) + 1;
  return phase.seqLen;
}

std::optional<Problem> layerProblem(const ir::Layer& l, int shards, long long seqLen) {
  const KernelRow* row = kernelFor(l.op);
  if (row == nullptr) {
    Problem p = layerFailure(l, "the emulator has no kernel for op \"" + ir::opName(l) + "\"",
                             "`ipu run` executes " + runnableOps() + " layers; use `ipu estimate` for the others");
    p.withoutKernel = true;
    return p;
  }
  Context c{l, seqLen, l.shardable ? std::max(1, shards) : 1, "", "", 0};
  for (const auto& r : row->requirements)
    if (!meets(r, l, c)) return layerFailure(l, fill(r.message, c), fill(r.help, c));
  return std::nullopt;
}

std::optional<Problem> modelProblem(const ir::PhasePlan& phase) {
  if (phase.layers.empty())
    return Problem{code::kUnsupportedModel, "phase `" + phase.name + "` trains model `" + phase.model + "`, which has no layers",
                   "declare the model's layers (`layer NAME = OP(...)`), or map another model", phase.source,
                   Reach::RunAndEstimate};
  const long long seqLen = sequenceLength(phase);
  const int shards = std::max(1, phase.mapping.shard);
  const auto& layers = phase.layers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const ir::Layer& l = layers[i];
    if (auto p = layerProblem(l, shards, seqLen)) return p;
    if (l.op != LayerOp::MlmHead && l.op != LayerOp::LmHead) continue;
    // The head's projection is the embedding's word matrix (vocab x hidden).
    const std::string word = l.tiedTo + ".word";
    const auto owner = std::find_if(layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(i), [&](const ir::Layer& e) {
      return e.op == LayerOp::Embedding && e.name == l.tiedTo;
    });
    if (owner == layers.begin() + static_cast<std::ptrdiff_t>(i))
      return Problem{code::kUnsupportedLayer,
                     "layer `" + l.name + "` is tied to `" + word + "`, which no earlier embedding layer declares",
                     "tie the head to the model's embedding layer", l.source, Reach::Run};
    if (whole(*owner, "vocab") != whole(l, "vocab") || whole(*owner, "hidden") != whole(l, "hidden"))
      return Problem{code::kUnsupportedLayer,
                     "layer `" + l.name + "` shares `" + word + "` but its vocab/hidden differ from the embedding's",
                     "give the head the embedding's vocab and hidden", l.source, Reach::Run};
  }

  // The first layer decides the data: tokens (BERT or GPT), images, or an MLP's features.
  const ir::Layer& first = layers.front();
  bool hasMlm = false, hasLm = false, hasNsp = false, hasSoftmax = false;
  for (const auto& l : layers) {
    hasMlm |= l.op == LayerOp::MlmHead;
    hasLm |= l.op == LayerOp::LmHead;
    hasNsp |= l.op == LayerOp::PooledClassifier;
    hasSoftmax |= l.op == LayerOp::SoftmaxLoss;
    if (&l != &first && l.op == LayerOp::Embedding)
      return stackFailure(l.source, "layer `" + l.name + "` is an embedding after the first layer",
                          "the emulator feeds tokens to the first layer only");
  }
  if (!isHead(layers.back()))
    return stackFailure(layers.back().source, "the model's last layer `" + layers.back().name + "` produces no loss",
                        "end the model with a loss layer (mlm_head, pooled_classifier, lm_head or softmax_loss)");
  auto has = [&](LayerOp op) {
    return std::any_of(layers.begin(), layers.end(), [op](const ir::Layer& l) { return l.op == op; });
  };
  const bool image = first.op == LayerOp::ConvStem || first.op == LayerOp::PatchEmbedding;
  long long hidden = -1, features = 0, vocab = 0;
  if (first.op == LayerOp::Embedding) {
    vocab = whole(first, "vocab");
    hidden = whole(first, "hidden");
    if (hasMlm && hasLm)
      return stackFailure(first.source, "the model has both an MLM and an LM head", "the emulator trains one of BERT or GPT");
    if (!hasMlm && !hasLm && !hasNsp)
      return stackFailure(first.source, "the model has an embedding but no language-model or NSP head",
                          "add an mlm_head or lm_head");
    if (hasSoftmax) return stackFailure(first.source, "softmax_loss after an embedding has no data to classify", "");
  } else if (first.op == LayerOp::ConvStem) {
    const long long size = whole(first, "size");
    features = whole(first, "channels") * size * size;
    if (phase.imageSize > 0 && size != phase.imageSize)
      return stackFailure(first.source, "the stem `" + first.name + "` takes images of side " + std::to_string(size) +
                                            " but the phase's image_size is " + std::to_string(phase.imageSize),
                          "give the stem `size: image_size`");
    if (!has(LayerOp::PooledFc))
      return stackFailure(first.source, "an image model needs a pooled_fc classifier", "end the model with pooled_fc(...)");
  } else if (first.op == LayerOp::PatchEmbedding) {
    // A ViT: the same images as a ResNet, cut into patches (its requirements
    // have checked that `image` is the phase's image_size and the patch tiles it).
    const long long side = whole(first, "image");
    features = whole(first, "channels") * side * side;
    hidden = whole(first, "hidden");
    if (!has(LayerOp::TokenClassifier))
      return stackFailure(first.source, "a ViT needs a token_classifier head", "end the model with token_classifier(...)");
  } else if (first.op == LayerOp::Dense) {
    features = whole(first, "inputs");
    if (!hasSoftmax) return stackFailure(first.source, "an MLP needs a softmax_loss layer", "end the model with softmax_loss(classes: ...)");
  } else {
    return stackFailure(first.source, "the first layer `" + first.name + "` is a `" + ir::opName(first) + "`",
                        "the emulator's first layer reads the data: an embedding (tokens), a dense layer (features), a "
                        "conv_stem or a patch_embedding (images)");
  }
  // Widths along the trunk must match.
  long long width = first.op == LayerOp::Dense || image ? features : hidden;
  for (const auto& l : layers) {
    long long in = -1, out = -1;
    switch (l.op) {
      case LayerOp::Attention:
      case LayerOp::Ffn:
      case LayerOp::MlmHead:
      case LayerOp::LmHead:
      case LayerOp::PooledClassifier:
      case LayerOp::ConvModule:
      case LayerOp::GroupedFfn:
      case LayerOp::LayerNorm:
      case LayerOp::TokenClassifier: in = out = whole(l, "hidden"); break;
      case LayerOp::PatchEmbedding:
        if (&l != &first)
          return stackFailure(l.source, "layer `" + l.name + "` is a patch_embedding after the first layer",
                              "the emulator feeds images to the first layer only");
        in = features;
        out = whole(l, "hidden");
        break;
      case LayerOp::Dense:
        in = whole(l, "inputs");
        out = whole(l, "outputs");
        break;
      case LayerOp::SoftmaxLoss: in = out = whole(l, "classes"); break;
      case LayerOp::Embedding: continue;  // it sets the width
      case LayerOp::ConvStem:
      case LayerOp::Bottleneck:
      case LayerOp::BasicBlock:
      case LayerOp::PooledFc: {
        // Widths are C*H*W; the layer's requirements have checked its sizes.
        ImageWidths w;
        if (!imageWidths(l, w) || !image)
          return stackFailure(l.source, "layer `" + l.name + "` is a `" + ir::opName(l) + "` in a model that does not start with a conv_stem",
                              "convolutional layers read images: start the model with conv_stem(...)");
        in = w.in;
        out = w.out;
        break;
      }
      // Every layer has met its kernel's requirements above.
      case LayerOp::Other: continue;
    }
    if (in != width)
      return stackFailure(l.source, "layer `" + l.name + "` expects width " + std::to_string(in) + " but receives " + std::to_string(width),
                          image ? "widths are channels x side x side: make each layer's inputs and size agree with the "
                                  "previous layer's output"
                                : "make consecutive layers' sizes agree");
    if (!isHead(l)) width = out;
    if ((l.op == LayerOp::MlmHead || l.op == LayerOp::LmHead) && whole(l, "vocab") != vocab)
      return stackFailure(l.source, "layer `" + l.name + "` has a vocab different from the embedding's", "");
  }
  return std::nullopt;
}

std::optional<Problem> phaseProblem(const ir::PhasePlan& phase) {
  if (auto p = modelProblem(phase)) return p;
  // Language models: the data pipeline's shortest sequences (image and MLP
  // models have no sequence).
  const ir::LayerOp first = phase.layers.front().op;
  const bool sequences = first == LayerOp::Embedding;
  if (sequences && phase.seqLen < 8)
    return Problem{code::kUnsupportedModel, "phase `" + phase.name + "` has seq_len " + std::to_string(phase.seqLen),
                   "the emulator needs sequences of at least 8 tokens", phase.source, Reach::Run};
  return std::nullopt;
}

std::vector<PhaseProblem> runProblems(const ir::RunPlan& run) {
  std::vector<PhaseProblem> out;
  for (const auto& ph : run.phases)
    if (auto p = phaseProblem(ph)) out.push_back({std::move(*p), ph.source});
  return out;
}

}  // namespace ipu::runnable
