// The hardware description the planner, cost model and emulator read: chips,
// machines and pods as plain data. The presets are declared in the language,
// in stdlib/pods.ipu, with their sources (../docs/hardware.md); nothing here
// hard-codes a GC200. Users declare their own chips and pods the same way.
#pragma once

#include <string>

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
  double gwLinkBandwidth = 0;        // bytes/s per machine between racks
  double hostBandwidth = 0;          // bytes/s per machine to the host
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
