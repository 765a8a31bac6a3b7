#include "interpreter/check/codes.h"

namespace ipu::check {

const std::vector<base::CodeInfo>& checkCodes() {
  using namespace code;
  static const std::vector<base::CodeInfo> codes = {
      {kUnknownName, "a name that is not declared, imported or built in"},
      {kDuplicateName, "a name declared twice in one module or block"},
      {kTypeMismatch, "a value of the wrong kind (a mapping where a precision is expected, ...)"},
      {kUnitMismatch, "a quantity with the wrong unit (a frequency where bytes are expected, ...)"},
      {kUnknownField, "a field the declaration kind does not have"},
      {kDuplicateField, "a field given twice in one block"},
      {kMissingField, "a required field is missing"},
      {kBadArgument, "an unknown, missing or surplus argument in a call"},
      {kCyclicDefinition, "a definition that depends on itself"},
      {kModuleNotFound, "an import or Lua file that cannot be found or read"},
      {kImportCycle, "modules that import each other"},
      {kAmbiguousName, "a name defined by two imported modules"},
      {kOutOfRange, "a number outside the range the field accepts"},
      {kInvalidOperation, "an operation the operands do not support (division by zero, indexing a number, ...)"},
      {kLimitExceeded, "a model or expression beyond the evaluator's limits (recursion, layer count)"},
      {kMisplacedMember, "a member in a block that cannot hold it (`layer` outside a model, ...)"},
      {kUnknownUnit, "a unit the language does not know"},
      {kNotCallable, "a call of something that is not a function or definition"},
      {kPhaseVariable, "a phase variable (`seq_len`, ...) used where no phase defines it"},
      {kUnusedHook, "a hook no training uses (warning)"},
      {kUnknownLayer, "a pipeline names a layer the model does not have"},
      {kLayerIndex, "a layer index outside a repeated group"},
      {kTooManyIpus, "t x p x r is more IPUs than the pod has"},
      {kReplicasPowerOfTwo, "a replica count that is not a power of two"},
      {kReplicaIpusPowerOfTwo, "IPUs per replica not a power of two (warning)"},
      {kPipelineGap, "pipeline IPU numbers that are not 0..p-1"},
      {kLayerNotPlaced, "a layer the pipeline does not place"},
      {kLayerPlacedTwice, "a layer placed on two IPUs"},
      {kAmpLength, "a per-IPU `available_memory_proportion` list of the wrong length"},
      {kPodUnderused, "a mapping that leaves IPUs of the pod idle (warning)"},
      {kRtsOneReplica, "replicated tensor sharding with one replica (warning)"},
      {kBalancedTooDeep, "balanced(p) with more IPUs than layers"},
      {kModelMismatch, "a training whose mapping is for another model"},
      {kBatchUnderdetermined, "fewer than two of micro_batch, gradient_accumulation, global_batch"},
      {kBatchInconsistent, "micro_batch x gradient_accumulation x replicas differs from global_batch"},
      {kBatchIndivisible, "a global batch that the given micro_batch (or gradient_accumulation) x replicas does not divide"},
      {kStepsAndEpochs, "both or neither of steps and epochs"},
      {kEpochsNeedSamples, "epochs with a dataset of unknown size"},
      {kUnknownPhase, "`from` names no phase"},
      {kPhaseOrder, "`from` names the phase itself or a later one"},
      {kDuplicatePhase, "two phases with one name"},
      {kBadSchedule, "an invalid learning-rate schedule (or, as a warning, one that decays upward)"},
      {kMissingSetting, "a training phase without a mapping, optimizer or learning rate"},
      {kBadRun, "`run` of something that is not a training"},
      {kDuplicateRun, "the same training run twice"},
      {kMaskedTokens, "more masked tokens than the sequence has"},
      {kNoPhases, "a training with no phase"},
      {kNothingToRun, "a script with nothing to plan"},
  };
  return codes;
}

}  // namespace ipu::check
