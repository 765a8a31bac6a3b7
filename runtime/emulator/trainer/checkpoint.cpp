// Canonical state (trainer/impl.h, trainer.h): one tensor per parameter,
// whatever the mapping, gathered from and scattered to the slots of every
// replica and shard group: weights, gradients, optimizer state and
// checkpoints, which the mapping-invariance tests compare.
#include "runtime/emulator/trainer/impl.h"

#include <sstream>

#include "runtime/emulator/fp16.h"

namespace ipu::emu {

using namespace trainer;

Mat PhaseTrainer::Impl::gather(int param, int what) const {
  const auto& spec = model->params()[static_cast<std::size_t>(param)].spec;
  Mat full = Mat::Zero(spec.rows, spec.cols);
  // Shards from the owner's group; chunks from every replica when sharded by RTS.
  const int ownerIpu = model->layers()[static_cast<std::size_t>(model->params()[static_cast<std::size_t>(param)].owner)].ipu;
  const bool chunked = what >= 2 || (what == 1 && rts) || (what == 0 && rtsStreamed);
  // Otherwise this instance's first replica's copy (replica 0 in one
  // process): another instance's copies are not updated here (update()).
  const bool everyReplica = chunked && rts;
  for (int r = everyReplica ? 0 : firstLocal; r < (everyReplica ? R : firstLocal + 1); ++r) {
    const Group& gr = group(r, ownerIpu);
    for (const auto& s : gr.slots) {
      if (s.param != param) continue;
      Mat block(s.rows, s.cols);
      if (what == 0) {
        block = phased ? s.home : s.value;
      } else if (what == 1) {
        block = s.grad;
      } else {
        block = full.block(s.row0, s.col0, s.rows, s.cols);
        const OptimizerState& st = stateOf(gr, s);
        const std::vector<float>& v = what == 2 ? st.m : what == 3 ? st.v : st.master;
        for (std::size_t i = 0; i < v.size(); ++i) block.data()[s.owned.begin + i] = v[i];
      }
      if ((what == 1 && rts) || (what == 0 && rtsStreamed)) {
        Mat cur = full.block(s.row0, s.col0, s.rows, s.cols);
        for (std::size_t i = s.owned.begin; i < s.owned.end; ++i) cur.data()[i] = block.data()[i];
        block = cur;
      }
      full.block(s.row0, s.col0, s.rows, s.cols) = block;
    }
  }
  return full;
}

void PhaseTrainer::Impl::scatterState(int param, int what, const Mat& canonical) {
  for (auto& gr : groups)
    for (auto& s : gr.slots) {
      if (s.param != param) continue;
      const Mat block = canonical.block(s.row0, s.col0, s.rows, s.cols);
      if (what == 0) {
        Mat& w = phased ? s.home : s.value;
        w = block;
        if (fp16Weights) fp16::roundNearest(w.data(), static_cast<std::size_t>(w.size()));
        continue;
      }
      OptimizerState& st = stateOf(gr, s);
      std::vector<float>& v = what == 2 ? st.m : what == 3 ? st.v : st.master;
      if (v.empty()) continue;
      v.assign(block.data() + s.owned.begin, block.data() + s.owned.end);
    }
}


NamedTensors PhaseTrainer::weights() const {
  NamedTensors out;
  for (std::size_t p = 0; p < impl_->model->params().size(); ++p)
    out.emplace_back(impl_->model->params()[p].name, impl_->gather(static_cast<int>(p), 0));
  return out;
}

NamedTensors PhaseTrainer::gradients() const {
  NamedTensors out;
  for (std::size_t p = 0; p < impl_->model->params().size(); ++p) {
    Mat g = impl_->gather(static_cast<int>(p), 1);
    g /= static_cast<float>(impl_->lastScale);
    out.emplace_back(impl_->model->params()[p].name, std::move(g));
  }
  return out;
}

Expected<bool> PhaseTrainer::setWeights(const NamedTensors& weights) {
  const auto& params = impl_->model->params();
  for (std::size_t p = 0; p < params.size(); ++p) {
    const Mat* found = nullptr;
    for (const auto& [name, m] : weights)
      if (name == params[p].name) found = &m;
    if (found == nullptr)
      return Error{code::kCheckpoint, "the weights have no tensor `" + params[p].name + "`", "they were saved from a different model", impl_->plan.source};
    if (found->rows() != params[p].spec.rows || found->cols() != params[p].spec.cols)
      return Error{code::kCheckpoint,
                   "tensor `" + params[p].name + "` is " + std::to_string(found->rows()) + "x" + std::to_string(found->cols()) + ", the model's is " +
                       std::to_string(params[p].spec.rows) + "x" + std::to_string(params[p].spec.cols),
                   "the weights were saved from a model of another size", impl_->plan.source};
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    for (const auto& [name, m] : weights)
      if (name == params[p].name) {
        impl_->scatterState(static_cast<int>(p), 0, m);
        if (impl_->master) impl_->scatterState(static_cast<int>(p), 4, m);
      }
  return true;
}

TensorFile PhaseTrainer::checkpoint() const {
  const Impl& im = *impl_;
  TensorFile f;
  f.set("format", "ipu-checkpoint/1");
  f.set("phase", im.plan.name);
  f.set("step", std::to_string(im.step));
  f.set("updates", std::to_string(im.updates));
  std::ostringstream ls;
  ls.precision(17);
  ls << im.lossScale;
  f.set("loss_scale", ls.str());
  f.set("good_steps", std::to_string(im.goodSteps));
  f.set("last_overflow", im.lastOverflow ? "1" : "0");
  std::ostringstream last;
  last.precision(17);
  last << im.lastScale;
  f.set("last_scale", last.str());
  f.set("seed", std::to_string(im.settings.seed));
  for (std::size_t p = 0; p < im.model->params().size(); ++p) {
    const std::string& n = im.model->params()[p].name;
    f.tensors.emplace_back(n, im.gather(static_cast<int>(p), 0));
    if (im.plan.optimizer.moments >= 1) f.tensors.emplace_back("m/" + n, im.gather(static_cast<int>(p), 2));
    if (im.plan.optimizer.moments >= 2) f.tensors.emplace_back("v/" + n, im.gather(static_cast<int>(p), 3));
    if (im.master) f.tensors.emplace_back("master/" + n, im.gather(static_cast<int>(p), 4));
  }
  for (auto& t : im.runningTensors()) f.tensors.push_back(std::move(t));
  return f;
}

NamedTensors PhaseTrainer::runningStatistics() const { return impl_->runningTensors(); }
Expected<bool> PhaseTrainer::setRunningStatistics(const NamedTensors& tensors) { return impl_->setRunningTensors(tensors); }

Expected<bool> PhaseTrainer::restore(const TensorFile& file) {
  Impl& im = *impl_;
  NamedTensors w;
  for (const auto& t : file.tensors)
    if (t.first.find('/') == std::string::npos) w.push_back(t);
  auto ok = setWeights(w);
  if (!ok) return ok.error();
  for (std::size_t p = 0; p < im.model->params().size(); ++p) {
    const std::string& n = im.model->params()[p].name;
    const int kinds[] = {2, 3, 4};
    const char* prefix[] = {"m/", "v/", "master/"};
    for (int k = 0; k < 3; ++k)
      if (const Mat* m = file.find(prefix[k] + n)) im.scatterState(static_cast<int>(p), kinds[k], *m);
  }
  auto statistics = im.setRunningTensors(file.tensors);
  if (!statistics) return statistics.error();
  try {
    im.step = std::stoll(file.get("step", "0"));
    im.updates = std::stoll(file.get("updates", "0"));
    im.lossScale = std::stod(file.get("loss_scale", "1"));
    im.goodSteps = std::stoll(file.get("good_steps", "0"));
    im.lastOverflow = file.get("last_overflow", "0") == "1";
    im.lastScale = std::stod(file.get("last_scale", "1"));
  } catch (...) {
    return Error{code::kCheckpoint, "the checkpoint's step or loss-scale fields are not numbers", "the file may be damaged", im.plan.source};
  }
  return true;
}

}  // namespace ipu::emu
