// What `ipu run` can execute, as data: one row per layer op the emulator has
// a kernel for, with the attributes the kernel requires and what it computes,
// and the rules a layer stack must follow as a whole. The emulator builds its
// kernels only for layers this table accepts (runtime/emulator/kernels), and
// `ipu check`, `plan`, `estimate` and `search` read the same table without
// linking the kernels: what `ipu run` would refuse is then a warning there
// (an error only where estimation needs it too), and the error of `ipu run`.
//
//   for (const auto& p : runnable::runProblems(run))
//     report(p.code, p.where, p.message, p.help, p.reach);
//
// Depends on the plan (runtime/ir) only: no kernel, no Eigen.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::runnable {

namespace code {
inline constexpr const char* kUnsupportedLayer = "IPU5002";  // no kernel for a layer's op, or attributes it cannot run
inline constexpr const char* kUnsupportedModel = "IPU5006";  // the layer stack cannot be executed as a whole
}  // namespace code

// What one requirement of a kernel checks. Requirements are checked in the
// order of their row; the first one a layer fails is the problem reported.
enum class Check {
  Positive,        // every key a whole number from 1 to 10^8
  ImageSize,       // every key a whole number from 1 to 10^7 (convolutional sizes)
  OneOf,           // the text key (`fallback` when absent) is one of `values`
  Divides,         // keys[0] divides each of the other keys
  AtLeast,         // keys[0] >= `limit`
  SequenceLength,  // keys[0], when given, equals the phase's sequence length
  CoversSequence,  // keys[0] >= the phase's sequence length
  SplitsOverShard, // keys[0] divisible by the shard count (shardable layers only)
  Tied,            // the layer's projection is tied to an embedding (`tie:`)
  ImageActivations,// one sample's trunk (C*H*W) under 2^24 values
  NormGroups,      // under `norm: "group"`, `norm_groups` (default 32) a whole number from 1 to 10^7
  NormGroupsDivide,// under `norm: "group"`, `norm_groups` divides every key
  PatchTokens,     // (image / patch)^2 + 1 tokens make the phase's sequence length
};

// The message and help are templates: `{key}` is the failing key, `{text}`
// a text key's value, `{seq_len}` the phase's sequence length, `{shard}`
// the shard count, `{tokens}` a patch embedding's tokens, `{norm_groups}`
// the norm groups (32 unless given), `{channels}` the channels they fail to
// divide, and `{NAME}` the value of attribute NAME.
struct Requirement {
  Check check;
  std::vector<const char*> keys;
  const char* message;
  const char* help;
  std::vector<const char*> values = {};  // OneOf
  const char* fallback = "";             // OneOf
  double limit = 0;                      // AtLeast
};

// One kernel of the emulator.
struct KernelRow {
  ir::LayerOp op;
  const char* runs;  // what it computes, for messages and docs
  bool head;         // it ends the stack with a loss
  std::vector<Requirement> requirements;
};

// Every kernel, in the order the IPU5002 message lists them.
const std::vector<KernelRow>& kernels();
// The row of `op`, null when the emulator has no kernel for it.
const KernelRow* kernelFor(ir::LayerOp op);
// "embedding, attention, ..., token_classifier": the runnable ops, for messages.
std::string runnableOps();

// What a problem stops: `ipu run` only, or estimation too (a phase without
// layers has no step time).
enum class Reach { Run, RunAndEstimate };

struct Problem {
  std::string code;     // code::k...
  std::string message;
  std::string help;
  ir::SourceRef where;  // the layer, or the phase
  Reach reach = Reach::Run;
  // The layer's op has no kernel at all: a layer written for estimation,
  // which `ipu run` refuses and checking accepts without a word (a warning
  // is for a layer the emulator could run but whose declaration lacks what
  // it needs).
  bool withoutKernel = false;
};

// The tokens a phase's sequences have as the emulator feeds them: the
// phase's seq_len, or for a ViT (a first layer `patch_embedding`) its image's
// patches and the class token.
long long sequenceLength(const ir::PhasePlan& phase);

// The first requirement of its kernel that layer `l` fails, split over
// `shards` IPUs in a phase whose sequences have `seqLen` tokens (IPU5002);
// nothing when the kernel can be built.
std::optional<Problem> layerProblem(const ir::Layer& l, int shards, long long seqLen);

// The first problem the emulator meets building the phase's model, in the
// order it meets them: no layers, each layer's kernel requirements and tie,
// then the stack as a whole (IPU5006: the first layer reads the data, a loss
// at the end, widths that chain).
std::optional<Problem> modelProblem(const ir::PhasePlan& phase);
// modelProblem, then a phase whose sequences have fewer than 8 tokens.
std::optional<Problem> phaseProblem(const ir::PhasePlan& phase);

// phaseProblem of every phase of the run (at most one each), with the phase.
struct PhaseProblem {
  Problem problem;
  ir::SourceRef phase;
};
std::vector<PhaseProblem> runProblems(const ir::RunPlan& run);

// The trunk widths (C*H*W) a convolutional layer reads and writes, and the
// classes of a pooled_fc (0 otherwise); false when its sizes are not whole
// numbers from 1 to 10^7 (layerProblem says which).
struct ImageWidths {
  long long in = 0, out = 0;
  int classes = 0;
};
bool imageWidths(const ir::Layer& layer, ImageWidths& out);
// Side of a convolution's or pool's output: floor((size + 2 pad - k) / stride) + 1.
int convOutSize(int size, int k, int stride, int pad);

// A numeric attribute (`fallback` when absent or a string), and a text one.
double number(const ir::Layer& l, const std::string& key, double fallback = -1);
std::string text(const ir::Layer& l, const std::string& key, const std::string& fallback);

}  // namespace ipu::runnable
