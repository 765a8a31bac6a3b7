#include "runtime/emulator/model.h"

#include <map>

#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/counter_rng.h"
#include "runtime/runnable/runnable.h"

namespace ipu::emu {

namespace {

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
  // Whether the stack can run is the kernel table's decision (runtime/runnable),
  // the one `ipu check` reports from; what follows builds what it accepts.
  if (auto problem = runnable::modelProblem(phase))
    return Error{problem->code, problem->message, problem->help, problem->where};
  auto model = std::make_shared<Model>();
  Model& m = *model;
  m.shards_ = std::max(1, phase.mapping.shard);
  const long long seqLen = runnable::sequenceLength(phase);
  // A ViT's sequences are its images' patches and the class token.
  if (phase.layers.front().op == ir::LayerOp::PatchEmbedding) m.imageTokens_ = static_cast<int>(seqLen);
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
        // modelProblem has checked that an earlier embedding of the same shape declares it.
        const int id = m.findParam(spec.tiedTo);
        if (id < 0 || m.params_[static_cast<std::size_t>(id)].spec.rows != spec.rows ||
            m.params_[static_cast<std::size_t>(id)].spec.cols != spec.cols)
          return Error{code::kInternal, "layer `" + l.name + "` is tied to `" + spec.tiedTo + "`, which the kernel table accepted but no embedding of its shape declares",
                       "this is a bug in ipu", l.source};
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
    m.layers_.push_back(std::move(ml));
  }

  // The family decides the data: BERT (MLM, NSP), GPT (next token), images or an MLP on features.
  const ir::Layer& first = phase.layers.front();
  for (const auto& l : phase.layers) {
    m.hasNsp_ |= l.op == ir::LayerOp::PooledClassifier;
    if (l.op == ir::LayerOp::LmHead) m.family_ = Family::Gpt;
    if (l.op == ir::LayerOp::SoftmaxLoss || l.op == ir::LayerOp::TokenClassifier) m.classes_ = static_cast<int>(attr(l, "classes"));
    if (l.op == ir::LayerOp::PooledFc) {
      ImageWidths w;
      imageWidths(l, w);
      m.classes_ = w.classes;
    }
  }
  if (first.op == ir::LayerOp::Embedding) {
    m.vocab_ = static_cast<int>(attr(first, "vocab"));
  } else if (first.op == ir::LayerOp::ConvStem) {
    m.family_ = Family::Image;
    m.imageChannels_ = static_cast<int>(attr(first, "channels"));
    m.imageSize_ = static_cast<int>(attr(first, "size"));
    m.features_ = m.imageChannels_ * m.imageSize_ * m.imageSize_;
  } else if (first.op == ir::LayerOp::PatchEmbedding) {
    m.family_ = Family::Image;
    m.imageChannels_ = static_cast<int>(attr(first, "channels"));
    m.imageSize_ = static_cast<int>(attr(first, "image"));
    m.features_ = m.imageChannels_ * m.imageSize_ * m.imageSize_;
  } else {
    m.family_ = Family::Mlp;
    m.features_ = static_cast<int>(attr(first, "inputs"));
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
