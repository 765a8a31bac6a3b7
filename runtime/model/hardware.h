// The hardware description the planner, cost model and emulator read: chips,
// machines and pods as plain data. The presets are declared in the language,
// in stdlib/pods.ipu, with their sources (../docs/hardware.md); nothing here
// hard-codes a GC200. Users declare their own chips and pods the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ipu::hw {

// The cost model's fitted parameters for a chip (and the software it ran):
// see docs/cost-model.md. `source` says what they were fitted on.
struct Calibration {
  bool present = false;
  std::string source;
  double matmulEfficiency = 0;   // share of peak for large matmuls
  double convEfficiency = 0;     // share of peak for large convolutions
  double attentionFactor = 0.5;  // attention products run at this fraction of the matmul efficiency
  double opLatencyCycles = 0;    // sync and control per operation
  double stepOverheadSeconds = 0;
  // Fixed cost of an optimizer step that grows with the model: the weight
  // update, its collectives and norm reductions and stream copies, per
  // parameter of one replica (0 in calibrations fitted before it existed).
  double updateSecondsPerParameter = 0;
  // A measured latency of one cross-rack step of a collective, in place of
  // the machine's gwLinkLatencySeconds (0: the machine's). `ipu calibrate`
  // does not fit it: no row can tell it apart from other per-step costs.
  double gwLatencySeconds = 0;
  // A host-side fixed cost of a step per framework, in place of
  // stepOverheadSeconds, for calibrations a user writes. `ipu calibrate` no
  // longer fits one: a constant per framework is a label of the rows it was
  // fitted on, and did not transfer to other models (docs/cost-model.md).
  std::map<std::string, double> softwareStepOverhead;
  // Leave-one-out errors of the rows the calibration was fitted on (predicted
  // / measured - 1 with the row left out of the fit), with what each row was:
  // they give an estimate its interval and say when a script is far from them.
  struct Row {
    std::string family;          // the kinds of layers of the model (cost::familyOf)
    double ipus = 0;             // IPUs used
    double accumulation = 0;     // gradient accumulation
    double looError = 0;
    // Predicted / measured - 1 with the row's whole configuration group left
    // out of the fit (cost::configurationGroup): what the intervals use.
    double logoError = 0;
    // The regime the row ran in, so an estimate can say when it leaves every
    // row's (cost::Regime). Calibrations fitted before these were recorded
    // leave `described` false: no regime is then judged against them.
    bool described = false;
    double microBatch = 0;
    double memory = 0;           // the fullest IPU's In-Processor Memory over its capacity, as planned
    bool phased = false;         // phased execution (sub-graphs or weights streamed)
    bool recomputes = false;     // some activations recomputed
    // The `software` it declared ("popart sdk2.5": framework and release),
    // so an estimate can say when its framework or release is not among the
    // rows of its kind of model. Calibrations fitted before it was recorded
    // leave `softwareRecorded` false: no framework or release is then judged.
    bool softwareRecorded = false;
    std::string software;
    // The chip it ran on: a record holds every row of its chip's
    // architecture (cost::architectureOf), and an estimate says when no row
    // of its kind of model ran on its own chip. Empty in calibrations fitted
    // before it was recorded: no chip is then judged.
    std::string chip;
  };
  std::vector<Row> rows;
};

struct Chip {
  std::string name;
  double clockHz = 0;
  int tiles = 0;
  double memoryBytes = 0;            // In-Processor Memory per IPU
  double fp16FlopsPerCycle = 0;      // per tile
  double fp32FlopsPerCycle = 0;      // per tile
  double memoryBandwidth = 0;        // bytes/s, SRAM aggregate
  double exchangeBandwidth = 0;      // bytes/s, on-chip tile-to-tile
  int ipuLinks = 0;
  double ipuLinkBandwidth = 0;       // bytes/s per link
  double codeBaseBytes = 0;          // always-live runtime, control and host-exchange code per IPU
  Calibration calibration;

  double peakFlops(bool fp16) const { return tiles * clockHz * (fp16 ? fp16FlopsPerCycle : fp32FlopsPerCycle); }
};

struct Machine {
  std::string name;
  Chip chip;
  int ipus = 0;                      // IPUs per machine
  double streamingMemoryBytes = 0;   // DDR per machine
  double streamingBandwidth = 0;     // bytes/s per IPU to Streaming Memory (an assumption: unpublished)
  // The range the unpublished bandwidth plausibly lies in (0, 0: none
  // declared): estimates that stream are re-priced at its ends.
  double streamingBandwidthLow = 0, streamingBandwidthHigh = 0;
  double gwLinkBandwidth = 0;        // bytes/s per machine between racks
  double gwLinkLatencySeconds = 0;   // per step of a collective between racks (an assumption: unpublished)
  double hostBandwidth = 0;          // bytes/s per machine to the host
  // Between host servers (an assumption: a data-centre network, not part of
  // the IPU-POD): what a gradient reduction crosses when the replicas run as
  // several host instances (`ipu estimate --instances N`).
  double hostNetworkBandwidth = 0;   // bytes/s per host, to the others
  double hostNetworkLatencySeconds = 0;  // per step of a collective's ring between hosts
  // The host's side of the input pipeline, per machine (assumptions: the
  // host servers are not part of the IPU-POD). Priced only for a dataset
  // that states its `host_work` or `sample_bytes`.
  int hostCores = 0;                 // CPU cores preparing the machine's samples (read, decode, augment)
  double hostStorageBandwidth = 0;   // bytes/s the machine's share of the host's storage reads
};

struct Pod {
  std::string name;
  Machine machine;
  int machines = 0;
  int machinesPerRack = 0;           // machines joined by IPU-Links (a POD64 rack is 16)
  bool powerOfTwoReplicas = true;    // the ring rule of Graphcore's collectives

  int ipus() const { return machines * machine.ipus; }
  int ipusPerRack() const { return machinesPerRack * machine.ipus; }
  double streamingBytesPerIpu() const { return machine.ipus > 0 ? machine.streamingMemoryBytes / machine.ipus : 0; }
};

}  // namespace ipu::hw
