// What the trainer's virtual IPUs hold (runtime/emulator/trainer.h): a
// group is one pipeline IPU of one replica, its slots the parameters (or
// shards of them) it holds with their gradients and optimizer state, its
// stash and exchange buffers the micro batches in flight. Plain data, shared
// by every part of PhaseTrainer::Impl (trainer/impl.h), which is why it has a
// header of its own.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "runtime/emulator/collectives.h"
#include "runtime/emulator/model.h"
#include "runtime/emulator/optimizer.h"

namespace ipu::emu::trainer {

// One layer's use of a parameter: its own gradient accumulator, so that the
// gradient of a tied tensor is the sum of its uses in layer order on every
// mapping (a shared accumulator would add them in schedule order).
struct Use {
  int layer = 0;
  Mat acc;
  bool written = false;
};

// A parameter (or one shard of it) as one shard group of one replica holds it.
struct Slot {
  int param = 0;
  int shard = -1;               // -1: the whole tensor (unsharded, or replicated on the group)
  Eigen::Index row0 = 0, col0 = 0, rows = 0, cols = 0;   // its block of the canonical tensor
  Mat value;                    // the weights on chip (phased: only while a segment using them runs)
  Mat home;                     // phased: the weights in Streaming Memory (with RTS of the weights, only
                                // this replica's share, `owned`, is kept current)
  Mat grad;                     // the step's summed gradient: the all-reduce buffer
  std::vector<Use> uses;
  Chunk owned;                  // the elements this replica updates (all, or its RTS chunk)
  OptimizerState state;         // on chip; empty when it lives in Streaming Memory
  int streamed = -1;            // index into the group's Streaming Memory
  bool primary = false;         // the copy in the owner layer's group (tied copies are not)
  std::vector<float> scratch;   // LAMB's update direction between the two passes
  NormSums sums;
};

// Saved between a stage's forward and backward pass for one micro batch.
struct StashEntry {
  std::vector<Mat> trunk;       // trunk values entering the stage's layers
  std::vector<int> trunkOf;     // per layer of the stage: index into trunk
  std::vector<Saved> saved;     // per layer (without recomputation, or once the stage is recomputed)
  double elements() const {
    double n = 0;
    for (const auto& t : trunk) n += static_cast<double>(t.size());
    for (const auto& s : saved) n += s.elements();
    return n;
  }
};

struct Message {
  int replica = 0, stage = 0, micro = 0;
  bool gradient = false;
  Mat tensor;
};

// (stage, micro batch), (param, shard), (layer, micro batch), (segment, micro batch).
using Key2 = std::pair<int, int>;

// One pipeline IPU of one replica: `t` physical IPUs that hold its layers.
struct Group {
  int replica = 0, ipu = 0;
  std::vector<Slot> slots;
  std::map<Key2, int> slotAt;              // (param, shard) -> slot
  std::vector<OptimizerState> streaming;   // Streaming Memory: offloaded optimizer state
  std::map<Key2, Mat> activationsIn, gradientsIn;   // exchange buffers, by (stage, micro batch)
  std::map<Key2, StashEntry> stash;
  std::vector<Message> outbox;
  double dynamicPeak = 0;                  // elements in stash and exchange buffers, this step
  // Phased execution: Streaming Memory's activations, the input of (layer,
  // micro batch), and the gradients between two segments, by (segment, micro batch).
  std::map<Key2, Mat> streamedInputs, streamedGradients;

  double dynamicElements() const {
    double n = 0;
    for (const auto& [k, e] : stash) n += e.elements();
    for (const auto& [k, m] : activationsIn) n += static_cast<double>(m.size());
    for (const auto& [k, m] : gradientsIn) n += static_cast<double>(m.size());
    for (const auto& m : outbox) n += static_cast<double>(m.tensor.size());
    return n;
  }
};

}  // namespace ipu::emu::trainer
