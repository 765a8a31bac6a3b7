// The model as the emulator executes it: the plan's layers with their kernels,
// how data flows between them, and the canonical list of parameters (one per
// distinct tensor, tied tensors once). The trunk is the chain of layers that
// transform the activations; a head (mlm_head, pooled_classifier, lm_head,
// softmax_loss, pooled_fc, token_classifier) reads the trunk where it stands and adds a loss, so BERT's two
// heads both read the last encoder's output and the loss is their sum.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/kernels/kernel.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::emu {

// Image: a classifier of images, convolutional (conv_stem first, pooled_fc
// last) or a ViT (patch_embedding first, token_classifier last).
enum class Family { Bert, Gpt, Mlp, Image };

struct ModelParam {
  std::string name;   // canonical: "<layer>.<param>", e.g. "encoder[0].attention.wq"
  ParamSpec spec;     // full shape, class, how it shards, initialiser
  int owner = 0;      // layer that declares it
};

struct ModelLayer {
  const ir::Layer* plan = nullptr;
  std::unique_ptr<Kernel> kernel;
  bool head = false;
  std::vector<ParamSpec> specs;   // the kernel's params(), kept: the executor asks for them per micro batch
  std::vector<int> params;   // canonical id of each of them, in order
  int stage = 0;
  int ipu = 0;               // pipeline IPU (shard group)
};

class Model {
 public:
  // Kernels and parameters for a phase; `shards` is the mapping's t.
  static Expected<std::shared_ptr<const Model>> build(const ir::PhasePlan& phase);

  Family family() const { return family_; }
  const std::vector<ModelLayer>& layers() const { return layers_; }
  const std::vector<ModelParam>& params() const { return params_; }
  int findParam(const std::string& name) const;
  int shards() const { return shards_; }
  // Sizes the data pipeline needs.
  int vocab() const { return vocab_; }
  int features() const { return features_; }   // MLP inputs, or an image's C*H*W
  int classes() const { return classes_; }     // MLP or image classes
  int imageChannels() const { return imageChannels_; }
  int imageSize() const { return imageSize_; }  // side of the square images
  int imageTokens() const { return imageTokens_; }  // a ViT's tokens per image (patches and class token), else 0
  bool hasNsp() const { return hasNsp_; }
  double parameterCount() const;

  // Initial values of every canonical parameter, from the seed alone (so any
  // mapping starts from the same weights).
  std::vector<Mat> initialValues(std::uint64_t seed) const;

 private:
  Family family_ = Family::Bert;
  std::vector<ModelLayer> layers_;
  std::vector<ModelParam> params_;
  int shards_ = 1;
  int vocab_ = 0, features_ = 0, classes_ = 0, imageChannels_ = 0, imageSize_ = 0, imageTokens_ = 0;
  bool hasNsp_ = false;
};

}  // namespace ipu::emu
