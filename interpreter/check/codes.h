// Check diagnostic codes (IPU1xxx): names and types (10xx), mappings onto pods
// (11xx), trainings and batches (12xx), sweeps (13xx). Stable: tests and docs refer to them.
#pragma once

#include <vector>

#include "interpreter/base/diagnostic.h"

namespace ipu::check::code {
inline constexpr const char* kUnknownName = "IPU1001";
inline constexpr const char* kDuplicateName = "IPU1002";
inline constexpr const char* kTypeMismatch = "IPU1003";
inline constexpr const char* kUnitMismatch = "IPU1004";
inline constexpr const char* kUnknownField = "IPU1005";
inline constexpr const char* kDuplicateField = "IPU1006";
inline constexpr const char* kMissingField = "IPU1007";
inline constexpr const char* kBadArgument = "IPU1008";
inline constexpr const char* kCyclicDefinition = "IPU1009";
inline constexpr const char* kModuleNotFound = "IPU1010";
inline constexpr const char* kImportCycle = "IPU1011";
inline constexpr const char* kAmbiguousName = "IPU1012";
inline constexpr const char* kOutOfRange = "IPU1013";
inline constexpr const char* kInvalidOperation = "IPU1014";
inline constexpr const char* kLimitExceeded = "IPU1015";
inline constexpr const char* kMisplacedMember = "IPU1016";
inline constexpr const char* kUnknownUnit = "IPU1017";
inline constexpr const char* kNotCallable = "IPU1018";
inline constexpr const char* kPhaseVariable = "IPU1019";
inline constexpr const char* kUnusedHook = "IPU1020";
inline constexpr const char* kUnknownLayer = "IPU1021";
inline constexpr const char* kLayerIndex = "IPU1022";

inline constexpr const char* kTooManyIpus = "IPU1101";
inline constexpr const char* kReplicasPowerOfTwo = "IPU1102";
inline constexpr const char* kReplicaIpusPowerOfTwo = "IPU1103";
inline constexpr const char* kPipelineGap = "IPU1104";
inline constexpr const char* kLayerNotPlaced = "IPU1105";
inline constexpr const char* kLayerPlacedTwice = "IPU1106";
inline constexpr const char* kAmpLength = "IPU1107";
inline constexpr const char* kPodUnderused = "IPU1108";
inline constexpr const char* kRtsOneReplica = "IPU1109";
inline constexpr const char* kBalancedTooDeep = "IPU1110";
inline constexpr const char* kModelMismatch = "IPU1111";
inline constexpr const char* kBatchNormReplicas = "IPU1112";
inline constexpr const char* kBatchNormUnused = "IPU1113";
inline constexpr const char* kSearchWithPlacement = "IPU1114";

inline constexpr const char* kBatchUnderdetermined = "IPU1201";
inline constexpr const char* kBatchInconsistent = "IPU1202";
inline constexpr const char* kBatchIndivisible = "IPU1203";
inline constexpr const char* kStepsAndEpochs = "IPU1204";
inline constexpr const char* kEpochsNeedSamples = "IPU1205";
inline constexpr const char* kUnknownPhase = "IPU1206";
inline constexpr const char* kPhaseOrder = "IPU1207";
inline constexpr const char* kDuplicatePhase = "IPU1208";
inline constexpr const char* kBadSchedule = "IPU1209";
inline constexpr const char* kMissingSetting = "IPU1210";
inline constexpr const char* kBadRun = "IPU1211";
inline constexpr const char* kDuplicateRun = "IPU1212";
inline constexpr const char* kMaskedTokens = "IPU1213";
inline constexpr const char* kNoPhases = "IPU1215";
inline constexpr const char* kNothingToRun = "IPU1216";
inline constexpr const char* kLabelSmoothingUnused = "IPU1217";

inline constexpr const char* kUnknownSweepPath = "IPU1301";
inline constexpr const char* kSweepPathNoEffect = "IPU1302";
inline constexpr const char* kBadDistribution = "IPU1303";
inline constexpr const char* kDistributionForField = "IPU1304";
inline constexpr const char* kGridNotFinite = "IPU1305";
inline constexpr const char* kGridTooLarge = "IPU1306";
inline constexpr const char* kBadMetric = "IPU1307";
inline constexpr const char* kBadEarlyTerminate = "IPU1308";
inline constexpr const char* kRunCapRequired = "IPU1309";
inline constexpr const char* kBadSweepStart = "IPU1310";
inline constexpr const char* kBadSweep = "IPU1311";
inline constexpr const char* kMetricDirection = "IPU1312";
inline constexpr const char* kHyperbandUnseenMetric = "IPU1313";
}  // namespace ipu::check::code

namespace ipu::check {
const std::vector<base::CodeInfo>& checkCodes();
}  // namespace ipu::check
