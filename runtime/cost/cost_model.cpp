#include "runtime/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "runtime/base/invariant.h"
#include "runtime/cost/codes.h"
#include "runtime/ir/instance_traffic.h"

namespace ipu::cost {

const std::vector<CodeTitle>& costCodes() {
  static const std::vector<CodeTitle> codes = {
      {code::kNoCalibration, "a chip without a calibration: its speed is unknown"},
      {code::kMissingHardware, "a chip or machine missing a figure the estimate needs (a bandwidth)"},
  };
  return codes;
}

double Breakdown::total() const {
  return compute + recompute + pipelineFillDrain + stageImbalance + exchange + allReduce + rtsCollectives + acrossInstances + streaming +
         optimizer + hostIo + overhead;
}

namespace {

std::string gbps(double bytesPerSecond) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytesPerSecond / 1e9);
  return buf;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", 100 * x);
  return buf;
}

// A duration as the report prints it: milliseconds below a second.
std::string seconds(double s) {
  char buf[32];
  if (s < 1) std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

std::string microseconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

double attribute(const ir::Layer& l, const char* name) {
  for (const auto& a : l.attributes)
    if (a.name == name) return a.number;
  return 0;
}

// The AMP (accumulating matrix product) units of a tile take the inner
// dimension of a product in groups of 16 and produce outputs in groups of 8
// (fp16; PopLibs' AMP partial-sum vertices): a dimension that is not a
// multiple is padded, and the padding is work done for nothing.
constexpr double kAmpInnerGroup = 16, kAmpOutputGroup = 8;

double padded(double n, double group) { return n > 0 ? std::ceil(n / group) * group / n : 1.0; }

// Work per useful FLOP of one product with inner dimension k and n outputs
// per row, over `rows` rows spread on `tiles` tiles: AMP padding, and the
// tiles left idle when the product has fewer output blocks than the chip has
// tiles.
double shapeCost(double rows, double k, double n, double tiles) {
  if (!(rows > 0) || !(k > 0) || !(n > 0)) return 1.0;
  double blocks = rows * std::ceil(n / kAmpOutputGroup);
  double occupancy = tiles > 0 ? std::min(1.0, blocks / tiles) : 1.0;
  return padded(k, kAmpInnerGroup) * padded(n, kAmpOutputGroup) / occupancy;
}

// The fixed host-side cost of a step of `software` under `cal`: its
// framework's, or the default when the calibration has no row of that
// framework (then a warning says so).
double softwareStepOverhead(const hw::Calibration& cal, const std::string& software, std::vector<RegimeFlag>* regimes) {
  const std::string fw = frameworkOf(software);
  const auto it = cal.softwareStepOverhead.find(fw);
  if (it != cal.softwareStepOverhead.end()) return it->second;
  if (regimes && !fw.empty() && !cal.softwareStepOverhead.empty())
    regimes->push_back({Regime::OtherFramework,
                        "no calibration row ran framework `" + fw + "`: its fixed cost per step is the default `step_overhead`"});
  return cal.stepOverheadSeconds;
}

// Bandwidths the estimate derives from the hardware description. The
// assumptions are stated in docs/cost-model.md.
struct Links {
  double collective = 0;  // ring all-reduce bandwidth per IPU inside a rack: 4 IPU-Links, each way
  double pointToPoint = 0;  // between pipeline neighbours: 2 IPU-Links, each way
  double gateway = 0;     // per IPU across racks (GW-Links)
  double host = 0;        // per IPU to the host
  double hostNetwork = 0; // per host to the others (host instances only)
  double streaming = 0;   // per IPU to Streaming Memory
};

struct LayerTime {
  double forward = 0, backward = 0, recompute = 0;  // seconds per micro batch on one IPU
  double flops = 0;                                              // FLOPs per micro batch on one IPU (with recompute)
};

class Model {
 public:
  Model(const ir::PhasePlan& p, std::vector<Problem>* problems, const Hosting& hosting)
      : p_(p), problems_(problems), instances_(std::max(1, hosting.instances)) {}

  // After run(): samples per second with the Streaming Memory traffic priced
  // at `bandwidth` in place of the machine's (an assumption's range end).
  // Only the streaming term depends on it; the step is summed as run() sums it.
  double samplesPerSecondAt(const PhaseEstimate& e, double bandwidth) const {
    Breakdown b = e.breakdown;
    if (stream_.any()) b.streaming = stream_.seconds(bandwidth);
    const double step = b.total();
    return step > 0 ? samples() / step : 0;
  }

  PhaseEstimate run() {
    PhaseEstimate e;
    e.name = p_.name;
    e.steps = p_.steps;
    const hw::Chip& chip = p_.pod.machine.chip;
    const hw::Calibration& cal = chip.calibration;
    if (!cal.present) {
      problem(code::kNoCalibration,
              "chip `" + chip.name + "` has no calibration, so `ipu estimate` cannot say how fast it runs",
              "derive it from a calibrated chip (`chip " + chip.name + " = GC200 with { ... }`), or give it "
              "`calibration: { ... }` fitted with `ipu calibrate`");
      return e;
    }
    e.calibration = cal.source;
    const bool fp16 = p_.precision.compute == ir::DType::FP16;
    peak_ = chip.peakFlops(fp16);
    clock_ = chip.clockHz;
    if (!(peak_ > 0) || !(clock_ > 0)) {
      problem(code::kMissingHardware, "chip `" + chip.name + "` has no peak FLOP rate", "give it `clock`, `tiles` and `flops_per_cycle`");
      return e;
    }
    bc_ = ir::bytesOf(p_.precision.compute);
    opLatency_ = cal.opLatencyCycles / clock_;
    // Element-wise work streams operands through SRAM: a read and a write per FLOP.
    elementwiseRate_ = chip.memoryBandwidth > 0 ? chip.memoryBandwidth / (2 * bc_) : peak_ * 0.05;
    if (!(chip.memoryBandwidth > 0)) e.assumptions.push_back("no SRAM bandwidth given: element-wise work at 5% of peak");
    const hw::Machine& m = p_.pod.machine;
    links_.collective = std::min(chip.ipuLinks, 4) * chip.ipuLinkBandwidth / 2;
    links_.pointToPoint = std::min(chip.ipuLinks, 2) * chip.ipuLinkBandwidth / 2;
    links_.gateway = m.ipus > 0 ? m.gwLinkBandwidth / m.ipus : 0;
    links_.host = m.ipus > 0 ? m.hostBandwidth / m.ipus : 0;
    links_.streaming = m.streamingBandwidth;

    const ir::Mapping& map = p_.mapping;
    t_ = std::max(1, map.shard);
    r_ = std::max(1, map.replicas);
    e.instances = instances_;
    if (instances_ > 1) {
      if (auto refusal = ir::refuseInstances(p_, instances_)) {
        if (problems_ != nullptr) problems_->push_back(Problem{code::kInstances, refusal->message, refusal->help, refusal->where});
        return e;
      }
      if (!(m.hostBandwidth > 0) || !(m.hostNetworkBandwidth > 0)) {
        problem(code::kMissingHardware,
                "machine `" + m.name + "` has no `" + (m.hostBandwidth > 0 ? "host_network_bandwidth" : "host_bandwidth") +
                    "`, which pricing the replicas as " + std::to_string(instances_) + " host instances needs",
                "give the machine `host_bandwidth` and `host_network_bandwidth` (std/pods states both)");
        return e;
      }
      links_.hostNetwork = m.hostNetworkBandwidth;
    }
    const int S = static_cast<int>(p_.stages.size());
    const long long ga = p_.schedule.microBatches;  // per step, through each stage
    const bool needLinks = S > 1 || t_ > 1 || r_ > 1;
    if (needLinks && !(chip.ipuLinkBandwidth > 0)) {
      problem(code::kMissingHardware, "chip `" + chip.name + "` has no `ipu_link_bandwidth`, which this mapping's communication needs",
              "give the chip `ipu_links` and `ipu_link_bandwidth`");
      return e;
    }

    // Per layer, per micro batch, on one IPU of its shard group.
    std::vector<LayerTime> lt(p_.layers.size());
    for (std::size_t i = 0; i < p_.layers.size(); ++i) lt[i] = layerTime(p_.layers[i], cal);

    // Stage boundaries (the plan's traffic): each stage receives activations
    // from the stage before it and sends them to the one after it in the
    // forward pass, and their gradients the other way in the backward pass.
    for (const auto& bd : p_.traffic.boundaries) {
      const double bytes = bd.activationBytes + bd.gradientBytes;
      for (int s : {bd.from, bd.from + 1}) {
        IPU_INVARIANT(s >= 0 && static_cast<std::size_t>(s) < p_.stages.size(), "a stage boundary of the plan's traffic lies between two of its stages");
        boundaryTime_[p_.stages[static_cast<std::size_t>(s)].ipu] += bytes / links_.pointToPoint;
      }
    }

    // Per pipeline IPU: its share of one micro batch.
    const int P = std::max(1, map.pipelineIpus);
    std::vector<IpuTime> ipus(static_cast<std::size_t>(P));
    for (int g = 0; g < P; ++g) ipus[static_cast<std::size_t>(g)].ipu = g;
    for (std::size_t i = 0; i < p_.layers.size(); ++i) {
      IpuTime& it = ipus[static_cast<std::size_t>(std::clamp(p_.layers[i].ipu, 0, P - 1))];
      it.forward += lt[i].forward;
      it.backward += lt[i].backward;
      it.recompute += lt[i].recompute;
      it.flopsPerStep += lt[i].flops * static_cast<double>(ga);
    }
    for (auto& it : ipus) it.exchange += boundaryTime_[it.ipu];
    // Distributed batch norm (the plan's traffic): small all-reduces among
    // the replicas of a batch-norm group inside the forward and backward
    // passes, each paying the ring's latency; per micro batch on the IPU
    // that computes the units. Zero without `batch_norm_replicas`.
    if (const int group = map.batchNormGroup(); group > 1) {
      // A group whose replicas live on several host instances reduces on
      // each instance's fabric, then through the hosts (as throughHosts, but
      // every small reduction pays the host network's latency). The worst
      // group sets the time: its most members on one instance, and the most
      // instances it spans.
      const int perInstance = std::max(1, r_ / instances_);
      double n = 1, spanned = 1;
      for (int first = 0; first < r_; first += group) {
        const int last = std::min(r_, first + group) - 1;
        spanned = std::max(spanned, static_cast<double>(last / perInstance - first / perInstance + 1));
        for (int owner = first / perInstance; owner <= last / perInstance; ++owner)
          n = std::max(n, static_cast<double>(std::min(last, (owner + 1) * perInstance - 1) - std::max(first, owner * perInstance) + 1));
      }
      for (const auto& c : p_.traffic.collectives) {
        if (c.tensors != ir::CollectiveTensors::BatchNormStatistics || c.ipu < 0 || c.ipu >= static_cast<int>(p_.ipus.size())) continue;
        const ir::Ipu& holder = p_.ipus[static_cast<std::size_t>(c.ipu)];
        if (holder.shard != 0) continue;
        double t = 2 * (n - 1) / n * c.bytes / links_.collective + c.operations * 2 * (n - 1) * opLatency_;
        if (spanned > 1)
          t += 2 * c.bytes / links_.host + 2 * (spanned - 1) / spanned * c.bytes / links_.hostNetwork +
               c.operations * 2 * (spanned - 1) * p_.pod.machine.hostNetworkLatencySeconds;
        ipus[static_cast<std::size_t>(std::clamp(holder.ipu, 0, P - 1))].exchange += t / static_cast<double>(ga);
      }
    }
    // Tensor sharding (the plan's traffic): the shard group's all-reduces of
    // the layers' partial outputs (forward and recomputation) and input
    // gradients (backward), a ring over the group's IPU-Links inside the
    // passes, each paying the ring's latency; per micro batch on the pipeline
    // IPU that holds the layers. The group's IPUs enter the same buffers, so
    // its first IPU's entries stand for it.
    if (t_ > 1)
      for (const auto& c : p_.traffic.collectives) {
        if (c.tensors != ir::CollectiveTensors::ShardActivations && c.tensors != ir::CollectiveTensors::ShardGradients) continue;
        IPU_INVARIANT(c.ipu >= 0 && static_cast<std::size_t>(c.ipu) < p_.ipus.size(), "the plan's collectives name IPUs of the plan");
        const ir::Ipu& holder = p_.ipus[static_cast<std::size_t>(c.ipu)];
        if (holder.shard != 0) continue;
        const double n = t_;
        ipus[static_cast<std::size_t>(std::clamp(holder.ipu, 0, P - 1))].exchange +=
            (2 * (n - 1) / n * c.bytes / links_.collective + c.operations * 2 * (n - 1) * opLatency_) / static_cast<double>(ga);
      }
    for (const auto& ipu : p_.ipus) {
      IpuTime& it = ipus[static_cast<std::size_t>(std::clamp(ipu.ipu, 0, P - 1))];
      it.memoryBytes = std::max(it.memoryBytes, ipu.memory.total());
      it.capacityBytes = ipu.capacityBytes;
      e.peakMemoryBytes = std::max(e.peakMemoryBytes, ipu.memory.total());
    }
    e.fits = p_.fits;

    // The pipeline: the plan's schedule (fill, steady state, drain). A
    // steady-state cycle lasts as long as the busiest IPU's work for one micro
    // batch (Graphcore: "the slowest stage sets the cycle"; idle IPUs wait at
    // the cycle's synchronisation); a ramp cycle, its busiest IPU's work in it.
    const long long cycles = p_.schedule.cycles();
    double maxBusy = 0, meanBusy = 0, meanCompute = 0, meanRecompute = 0, meanExchange = 0;
    for (const auto& it : ipus) {
      maxBusy = std::max(maxBusy, it.busy());
      meanBusy += it.busy() / P;
      meanCompute += (it.forward + it.backward) / P;
      meanRecompute += it.recompute / P;
      meanExchange += it.exchange / P;
    }
    Breakdown& b = e.breakdown;
    const double gad = static_cast<double>(ga);
    b.compute = gad * meanCompute;
    b.recompute = gad * meanRecompute;
    b.exchange = gad * meanExchange;
    b.stageImbalance = gad * (maxBusy - meanBusy);
    const double pipelineTime = pipelineSeconds(lt, ipus, maxBusy, e);
    b.pipelineFillDrain = pipelineTime - gad * maxBusy;

    collectives(b, e, cal);
    optimizerAndStreaming(b, e, pipelineTime);
    hostIo(b, e, pipelineTime, gad);
    // The host-side cost of a step: a round trip to the host (the
    // calibration's `step_overhead`, or a framework's own where a user's
    // calibration states one), which the device makes once per
    // `device_iterations` steps.
    b.overhead = softwareStepOverhead(cal, p_.software, &e.regimes) / static_cast<double>(std::max(1LL, p_.deviceIterations));

    e.stepTime = b.total();
    e.cycles = static_cast<int>(cycles);
    e.cycleTime = maxBusy;
    e.pipelineUtilisation = pipelineTime > 0 ? gad * meanBusy / pipelineTime : 0;
    e.samplesPerSecond = e.stepTime > 0 ? samples() / e.stepTime : 0;
    e.tokensPerSecond = p_.seqLen > 0 && e.stepTime > 0
                            ? static_cast<double>(p_.batch.globalBatch) * static_cast<double>(p_.seqLen) / e.stepTime
                            : 0;
    e.timeToTrain = static_cast<double>(p_.steps) * e.stepTime;
    for (auto& it : ipus) it.utilisation = e.stepTime > 0 ? it.flopsPerStep / (e.stepTime * peak_) : 0;
    e.ipus = std::move(ipus);
    e.ok = true;
    return e;
  }

 private:
  void problem(const char* c, std::string message, std::string help) {
    if (problems_ != nullptr) problems_->push_back(Problem{c, std::move(message), std::move(help), p_.mapping.source});
  }

  // The step's pipeline cycles, each as long as its busiest IPU's work in
  // it (every IPU waits at the cycle's synchronisation). In the steady state
  // every stage runs a forward and a (recomputation and) backward, so a cycle
  // lasts the busiest IPU's whole work for a micro batch; while the pipeline
  // fills only forwards run, and while it drains only backwards, so those
  // cycles last as long as the work they do (PopART runs the ramps as
  // programs of their own). The schedule (ir::PipelineSchedule) says which.
  // The ramp cycles' lengths and the stages' work go into `e` (the timeline
  // draws them).
  double pipelineSeconds(const std::vector<LayerTime>& lt, const std::vector<IpuTime>& ipus, double maxBusy, PhaseEstimate& e) const {
    const ir::PipelineSchedule& sch = p_.schedule;
    const long long cycles = sch.cycles(), ga = std::max(1LL, sch.microBatches);
    const int S = static_cast<int>(p_.stages.size());
    const int P = static_cast<int>(ipus.size());
    e.stages.assign(static_cast<std::size_t>(S), PhaseEstimate::StageTime{});
    std::vector<int> stagesOn(static_cast<std::size_t>(P), 0);
    for (int s = 0; s < S; ++s) {
      const ir::Stage& st = p_.stages[static_cast<std::size_t>(s)];
      PhaseEstimate::StageTime& t = e.stages[static_cast<std::size_t>(s)];
      t.ipu = std::clamp(st.ipu, 0, P - 1);
      ++stagesOn[static_cast<std::size_t>(t.ipu)];
      for (int i : st.layers) {
        if (i < 0 || static_cast<std::size_t>(i) >= lt.size()) continue;
        t.forward += lt[static_cast<std::size_t>(i)].forward;
        t.recompute += lt[static_cast<std::size_t>(i)].recompute;
        t.backward += lt[static_cast<std::size_t>(i)].backward;
      }
    }
    // An IPU's exchange (boundary transfers, collectives) is half its
    // forwards' (activations) and half its backwards' (gradients).
    for (auto& t : e.stages) t.exchangeShare = 0.5 / stagesOn[static_cast<std::size_t>(t.ipu)];
    e.rampCycleSeconds.clear();
    if (S <= 1 || sch.stages != S) {
      e.fullCycleBegin = 0;
      e.fullCycles = cycles;
      return static_cast<double>(cycles) * maxBusy;
    }
    // Cycles 2(S - 1) to GA - 1 are full (every stage both ways).
    const long long firstFull = 2LL * (S - 1), full = std::max(0LL, ga - firstFull);
    e.fullCycleBegin = std::min(firstFull, cycles);
    e.fullCycles = full;
    double total = static_cast<double>(full) * maxBusy;
    std::vector<double> work(static_cast<std::size_t>(P));
    // Only the ramps, cycle by cycle: the full cycles [firstFull, GA) are skipped whole.
    for (long long c = 0; c < cycles; c = (c + 1 == firstFull && ga > firstFull) ? ga : c + 1) {
      std::fill(work.begin(), work.end(), 0.0);
      for (int s = 0; s < S; ++s) {
        const ir::StageCycle at = sch.at(s, c);
        const PhaseEstimate::StageTime& t = e.stages[static_cast<std::size_t>(s)];
        const double exchange = ipus[static_cast<std::size_t>(t.ipu)].exchange * t.exchangeShare;
        if (at.forward >= 0) work[static_cast<std::size_t>(t.ipu)] += t.forward + exchange;
        if (at.backward >= 0) work[static_cast<std::size_t>(t.ipu)] += t.backward + t.recompute + exchange;
      }
      const double cycle = *std::max_element(work.begin(), work.end());
      e.rampCycleSeconds.push_back(cycle);
      total += cycle;
    }
    return total;
  }

  // How much work the chip does per useful FLOP of a layer's matmuls and
  // attention products, for their shapes (1 for shapes that fill the AMP
  // units and the tiles). The shapes come from the layer's arguments: its
  // width (`hidden`, `intermediate`), `heads` and `seq`.
  struct Shape {
    double matmul = 1, attention = 1;
  };
  Shape shapeOf(const ir::Layer& l) const {
    Shape sh;
    const double tiles = p_.pod.machine.chip.tiles;
    const double hidden = attribute(l, "hidden"), seq = attribute(l, "seq");
    const double mb = static_cast<double>(std::max<long long>(1, p_.batch.microBatch));
    if (!(hidden > 0) || !(seq > 0)) return sh;
    const double tokens = mb * seq;
    const double width = (l.shardable ? hidden / t_ : hidden);
    if (const double inter = attribute(l, "intermediate"); inter > 0) {
      const double w = l.shardable ? inter / t_ : inter;
      sh.matmul = (shapeCost(tokens, hidden, w, tiles) + shapeCost(tokens, w, hidden, tiles)) / 2;
    } else {
      sh.matmul = shapeCost(tokens, hidden, width, tiles);
    }
    if (const double heads = attribute(l, "heads"); heads > 0) {
      // QK^T (inner: the head size, outputs: seq) and AV (inner: seq, outputs: the head size), per head.
      const double d = hidden / heads, rows = mb * seq * (l.shardable ? heads / t_ : heads);
      sh.attention = (shapeCost(rows, d, seq, tiles) + shapeCost(rows, seq, d, tiles)) / 2;
    }
    return sh;
  }

  // A layer on one IPU of its shard group, for one micro batch.
  LayerTime layerTime(const ir::Layer& l, const hw::Calibration& cal) const {
    const double share = l.shardable ? 1.0 / t_ : 1.0;
    const Shape sh = shapeOf(l);
    auto dense = [&](const ir::Flops& f) {
      return share * (f.matmul * sh.matmul / (peak_ * cal.matmulEfficiency) +
                      f.attention * sh.attention / (peak_ * cal.matmulEfficiency * cal.attentionFactor) +
                      f.conv / (peak_ * cal.convEfficiency) + f.elementwise / elementwiseRate_);
    };
    LayerTime x;
    x.forward = dense(l.forward) + l.ops * opLatency_;
    x.backward = dense(l.backward) + 2 * l.ops * opLatency_;
    const bool recompute = p_.mapping.recompute != ir::Recompute::None;
    x.recompute = recompute ? x.forward : 0;
    x.flops = share * (l.forward.total() * (recompute ? 2 : 1) + l.backward.total());
    return x;
  }

  // The plan's collectives across replicas: a ring inside each rack over
  // IPU-Links, and between racks over GW-Links (hierarchically). The replicas
  // reduce their gradients (a reduce-scatter with replicated tensor sharding
  // of the optimizer state, which then all-gathers the updated weights) on
  // every IPU at once; the IPU with the largest buffer sets the time.
  //
  // With the replicas run as N host instances (Hosting), each instance's
  // k = R/N replicas reduce-scatter among themselves on the fabric as above,
  // every IPU sends its 1/k share to its host and takes the sum back over the
  // machine's host link (shared by the machine's IPUs), and the hosts
  // all-reduce between them in a ring over their network, each holding its
  // IPUs' shares; then the instance's ring all-gathers. One instance per
  // host; the hosts' additions are not priced (they stream at memory speed,
  // far above the network's).
  // An all-reduce of `bytes` per IPU between host instances, after the
  // instance's own replicas reduce-scattered it on the fabric: the IPU's
  // share to its host and back, and the hosts' ring over the instance's
  // shares. Zero with one instance.
  double throughHosts(double bytes) const {
    if (instances_ <= 1) return 0;
    const double n = instances_;
    const double share = bytes / (r_ / n);
    const double ipus = static_cast<double>(p_.ipusUsed) / n;
    return 2 * share / links_.host + 2 * (n - 1) / n * (ipus * share) / links_.hostNetwork +
           2 * (n - 1) * p_.pod.machine.hostNetworkLatencySeconds;
  }

  void collectives(Breakdown& b, PhaseEstimate& e, const hw::Calibration& cal) {
    if (r_ <= 1) return;
    const ir::Collective* grads = nullptr;
    const ir::Collective* gather = nullptr;
    for (const auto& c : p_.traffic.collectives) {
      if (c.tensors == ir::CollectiveTensors::Gradients && (grads == nullptr || c.bytes > grads->bytes)) grads = &c;
      if (c.tensors == ir::CollectiveTensors::UpdatedWeights && (gather == nullptr || c.bytes > gather->bytes)) gather = &c;
    }
    if (grads == nullptr) return;
    const double instances = instances_;
    const double local = r_ / instances;                       // replicas per instance
    const double used = static_cast<double>(p_.ipusUsed) / instances;  // IPUs per instance
    const double rackIpus = std::max(1, p_.pod.ipusPerRack());
    const double racks = std::max(1.0, std::ceil(used / rackIpus));
    const double inRack = std::max(1.0, local / racks);
    const double gwLatency = cal.gwLatencySeconds > 0 ? cal.gwLatencySeconds : p_.pod.machine.gwLinkLatencySeconds;
    // On the fabric, among one instance's replicas (all of them with one instance).
    auto fabric = [&](double bytes) {
      double t = 2 * (inRack - 1) / inRack * bytes / links_.collective + 2 * (inRack - 1) * opLatency_;
      if (racks > 1) {
        // Between racks, on the 1/inRack of the data each IPU holds after the
        // reduce-scatter inside its rack; every step of the ring pays the
        // GW-Link latency (the machine's, or one a calibration measured) as
        // well as the bandwidth.
        t += 2 * (racks - 1) / racks * (bytes / inRack) / links_.gateway + 2 * (racks - 1) * (opLatency_ + gwLatency);
      }
      return t;
    };
    if (racks > 1 && !(links_.gateway > 0)) {
      problem(code::kMissingHardware, "machine `" + p_.pod.machine.name + "` has no `gw_link_bandwidth`, which reducing across racks needs",
              "give the machine `gw_link_bandwidth`");
      return;
    }
    // A reduce-scatter or an all-gather is half an all-reduce.
    const double half = grads->kind == ir::CollectiveKind::AllReduce ? 1 : 2;
    b.allReduce = fabric(grads->bytes) / half;
    b.acrossInstances = throughHosts(grads->bytes) / half;
    if (gather != nullptr) {
      b.rtsCollectives = fabric(gather->bytes) / 2;
      b.acrossInstances += throughHosts(gather->bytes) / 2;
    }
    if (racks > 1)
      e.assumptions.push_back("across racks, gradients travel over GW-Links at " + gbps(links_.gateway) + " per IPU, " +
                              microseconds(gwLatency) + " per ring step" +
                              (cal.gwLatencySeconds > 0 ? " (the calibration's)" : " (the machine's `gw_link_latency`, an assumption)"));
    if (instances > 1)
      e.assumptions.push_back("across " + std::to_string(instances_) + " host instances, one per host, gradients go through the hosts: " +
                              gbps(links_.host) + " per IPU over the machine's host link, then " + gbps(links_.hostNetwork) +
                              " per host and " + microseconds(p_.pod.machine.hostNetworkLatencySeconds) +
                              " per ring step between hosts (the machine's `host_network_bandwidth` and `host_network_latency`, assumptions)");
  }

  // The weight update reads and writes weights, accumulators and state in
  // SRAM; offloaded state (or phased execution) adds the plan's Streaming
  // Memory traffic.
  void optimizerAndStreaming(Breakdown& b, PhaseEstimate& e, double pipelineTime) {
    const hw::Chip& chip = p_.pod.machine.chip;
    const ir::Mapping& map = p_.mapping;
    const ir::Precision& prec = p_.precision;
    const double stateBytes = p_.optimizer.moments * ir::bytesOf(prec.optimizerState) + (prec.masterWeights ? 4.0 : 0.0);
    const double rtsO = map.rtsOptimizerState ? r_ : 1;
    double worstUpdate = 0, worstStream = 0, worstStateStream = 0;
    for (const auto& ipu : p_.ipus) {
      if (ipu.shard != 0) continue;
      const double updated = ipu.parameters / rtsO;
      const double sram = updated * (2 * ir::bytesOf(prec.weights) + ir::bytesOf(prec.accumulators) + 2 * stateBytes);
      double update = (chip.memoryBandwidth > 0 ? sram / chip.memoryBandwidth : 0) + static_cast<double>(ipu.layers.size()) * 4 * opLatency_;
      worstUpdate = std::max(worstUpdate, update);
    }
    // The state streams during the update; phased execution's weights,
    // gradients and stash while the pipeline runs.
    for (const auto& st : p_.traffic.streaming) {
      IPU_INVARIANT(st.ipu >= 0 && static_cast<std::size_t>(st.ipu) < p_.ipus.size(), "the plan's Streaming Memory traffic names IPUs of the plan");
      if (p_.ipus[static_cast<std::size_t>(st.ipu)].shard != 0) continue;
      worstStateStream = std::max(worstStateStream, st.optimizerState);
      worstStream = std::max(worstStream, st.phased());
    }
    // Streamed weights sharded across replicas are gathered as they load
    // (the entry sums the step's gathers, one per segment run).
    for (const auto& c : p_.traffic.collectives) {
      if (c.tensors != ir::CollectiveTensors::StreamedWeights) continue;
      IPU_INVARIANT(c.ipu >= 0 && static_cast<std::size_t>(c.ipu) < p_.ipus.size(), "the plan's collectives name IPUs of the plan");
      if (p_.ipus[static_cast<std::size_t>(c.ipu)].shard == 0) {
        const double k = static_cast<double>(r_) / instances_;   // the replicas on one instance's fabric
        b.rtsCollectives += (k - 1.0) / k * c.bytes / links_.collective;
        b.acrossInstances += throughHosts(c.bytes) / 2;   // the shares of other instances' replicas: half an all-reduce
      }
    }
    // The rest of the weight update is a fixed cost of the step that grows
    // with the model, not with the micro batches: per parameter of the replica
    // (calibrated), the gradient collectives' set-up, LAMB/LARS norm
    // reductions, the update's stream copies and program switches, which run
    // stage after stage.
    double replicaParams = 0;
    for (const auto& l : p_.layers) replicaParams += l.params;
    b.optimizer = worstUpdate + replicaParams * p_.pod.machine.chip.calibration.updateSecondsPerParameter;
    if (worstStateStream > 0 || worstStream > 0) {
      if (!(links_.streaming > 0)) {
        problem(code::kMissingHardware, "machine `" + p_.pod.machine.name + "` has no `streaming_bandwidth`, which offloading needs",
                "give the machine `streaming_bandwidth`");
        return;
      }
      stream_ = {worstStateStream, worstUpdate, worstStream, pipelineTime};
      b.streaming = stream_.seconds(links_.streaming);
      e.assumptions.push_back("Streaming Memory bandwidth " + gbps(links_.streaming) +
                              " per IPU is an assumption: Graphcore does not publish it");
    }
  }

  // The input pipeline runs ahead of the device (the frameworks prefetch):
  // while a step computes, each machine's host reads the next step's samples
  // from storage, decodes and augments them on its cores, and sends each
  // replica's input over the machine's host link. The slowest of the three
  // bounds the step; only what the pipeline's compute does not hide counts.
  // Reading and preparing are priced only for a dataset that states its
  // `sample_bytes` and `host_work`.
  void hostIo(Breakdown& b, PhaseEstimate& e, double pipelineTime, double ga) {
    if (p_.layers.empty()) return;
    double bound = 0;
    if (links_.host > 0) bound = ga * p_.layers.front().inputElements * bc_ / links_.host;
    const hw::Machine& m = p_.pod.machine;
    const ir::Dataset& d = p_.dataset;
    if (d.hostWorkSeconds > 0 || d.sampleBytes > 0) {
      const double machines = std::max(1.0, static_cast<double>(p_.ipusUsed) / std::max(1, m.ipus));
      const double perMachine = static_cast<double>(p_.batch.globalBatch) / machines;   // samples each host prepares per step
      // One stage of the host's: `amount` per sample at the machine's `rate`
      // per second; false (and a problem) when the machine does not state it.
      double cpu = 0, read = 0;
      auto stage = [&](double amount, double rate, const char* datasetField, const char* machineField, const char* stdlib, double& out) {
        if (!(amount > 0)) return true;
        if (!(rate > 0)) {
          problem(code::kMissingHardware,
                  "machine `" + m.name + "` has no `" + machineField + "`, which pricing dataset `" + d.name + "`'s `" + datasetField + "` needs",
                  "give the machine `" + std::string(machineField) + "` (std/pods states " + stdlib + "), or leave `" + datasetField +
                      "` out of the dataset");
          return false;
        }
        out = perMachine * amount / rate;
        bound = std::max(bound, out);
        return true;
      };
      if (!stage(d.hostWorkSeconds, m.hostCores, "host_work", "host_cores", "32", cpu) ||
          !stage(d.sampleBytes, m.hostStorageBandwidth, "sample_bytes", "host_storage_bandwidth", "1.5 GB/s", read))
        return;
      std::string said = "the host prepares " + fmt("%.4g", perMachine) + " samples per step for each machine:";
      if (cpu > 0) said += " " + seconds(cpu) + " of host CPU (" + seconds(d.hostWorkSeconds) + " per sample on " + std::to_string(m.hostCores) + " cores)";
      if (read > 0) said += std::string(cpu > 0 ? "," : "") + " " + seconds(read) + " of storage reads at " + gbps(m.hostStorageBandwidth);
      e.assumptions.push_back(said + (bound > pipelineTime ? ", longer than the pipeline's " + seconds(pipelineTime) + ": the host bounds the step"
                                                            : ", hidden behind the pipeline's " + seconds(pipelineTime)) +
                              " (the machine's `host_cores` and `host_storage_bandwidth`, assumptions)");
    }
    b.hostIo = std::max(0.0, bound - pipelineTime);
  }

  double samples() const { return static_cast<double>(p_.batch.globalBatch) * std::max(1.0, p_.dataset.sequencesPerPack); }

  // What the step's Streaming Memory traffic costs at a bandwidth: the state
  // streams during the update (not hidden), phased traffic overlaps the
  // pipeline's compute.
  struct StreamingTerms {
    double stateBytes = 0, updateSeconds = 0, phasedBytes = 0, pipelineSeconds = 0;
    bool any() const { return stateBytes > 0 || phasedBytes > 0; }
    double seconds(double bandwidth) const {
      return std::max(0.0, stateBytes / bandwidth - updateSeconds) + std::max(0.0, phasedBytes / bandwidth - pipelineSeconds);
    }
  };

  const ir::PhasePlan& p_;
  std::vector<Problem>* problems_;
  int instances_ = 1;   // host instances (Hosting)
  StreamingTerms stream_;
  double peak_ = 0, clock_ = 0, bc_ = 2, opLatency_ = 0, elementwiseRate_ = 0;
  int t_ = 1, r_ = 1;
  Links links_;
  std::map<int, double> boundaryTime_;
};

}  // namespace

double PhaseEstimate::cycleSeconds(long long cycle) const {
  if (cycle >= fullCycleBegin && cycle < fullCycleBegin + fullCycles) return cycleTime;
  const long long ramp = cycle < fullCycleBegin ? cycle : cycle - fullCycles;
  if (ramp < 0 || ramp >= static_cast<long long>(rampCycleSeconds.size())) return cycleTime;
  return rampCycleSeconds[static_cast<std::size_t>(ramp)];
}

std::string frameworkOf(const std::string& software) {
  const std::size_t start = software.find_first_not_of(' ');
  if (start == std::string::npos) return "";
  const std::size_t end = software.find(' ', start);
  return software.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string releaseOf(const std::string& software) {
  const std::string fw = frameworkOf(software);
  if (fw.empty()) return "";
  std::size_t start = software.find(fw) + fw.size();
  start = software.find_first_not_of(' ', start);
  if (start == std::string::npos) return "";
  const std::size_t end = software.find_last_not_of(' ');
  return software.substr(start, end + 1 - start);
}

std::string familyOf(const ir::PhasePlan& phase) {
  std::set<std::string> ops;
  for (const auto& l : phase.layers) ops.insert(ir::opName(l));
  std::string out;
  for (const auto& o : ops) out += (out.empty() ? "" : "+") + o;
  return out;
}


ComparableErrors comparableErrors(const std::vector<hw::Calibration::Row>& rows, const std::string& family, double ipus,
                                  double accumulation, std::size_t skip) {
  ComparableErrors out;
  std::vector<std::pair<double, std::size_t>> near;   // (distance, row) of the model's kind
  std::size_t others = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i == skip) continue;
    ++others;
    const auto& r = rows[i];
    if (r.family != family) continue;
    const double d = std::fabs(std::log2(std::max(1.0, r.ipus) / std::max(1.0, ipus))) +
                     0.5 * std::fabs(std::log2(std::max(1.0, r.accumulation) / std::max(1.0, accumulation)));
    near.emplace_back(d, i);
  }
  auto nominal = [](std::size_t n) {
    const std::size_t j = std::max<std::size_t>(1, (n + 1) / 10);
    return std::to_string(static_cast<int>(std::lround(100.0 * static_cast<double>(n + 1 - 2 * std::min(j, n)) /
                                                       static_cast<double>(n + 1))));
  };
  if (near.size() < kFewestIntervalRows) {
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (i != skip) out.errors.push_back(rows[i].logoError);
    out.basis = "the leave-one-group-out errors of all " + std::to_string(others) + " rows of the calibration, nominally " +
                nominal(out.errors.size()) + "%";
    for (const auto& [distance, i] : near) out.kindErrors.push_back(rows[i].logoError);
    if (!out.kindErrors.empty()) {
      const auto [low, high] = std::minmax_element(out.kindErrors.begin(), out.kindErrors.end());
      const std::size_t n = out.kindErrors.size();
      out.basis += ", and spanning the " + (n == 1 ? std::string("one row") : std::to_string(n) + " rows") + " of this model's kind (" +
                   (n == 1 ? percent(*low) : percent(*low) + " to " + percent(*high)) + ")";
    }
    return out;
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t k = std::min(kIntervalRows, near.size());
  for (std::size_t i = 0; i < k; ++i) out.errors.push_back(rows[near[i].second].logoError);
  out.basis = "the leave-one-group-out errors of the " + std::to_string(k) + " calibration rows of this model's kind" +
              (k < near.size() ? " nearest in IPUs and accumulation" : "") + ", nominally " + nominal(k) + "%";
  return out;
}

ErrorRange likelyErrorRange(std::vector<double> errors) {
  ErrorRange r;
  if (errors.empty()) return r;
  std::sort(errors.begin(), errors.end());
  // A prediction interval from order statistics: a new value exchangeable
  // with n others falls between the j-th smallest and the j-th largest of
  // them with probability (n + 1 - 2j) / (n + 1); j = floor((n + 1) / 10),
  // at least 1, makes that 80% or a little more (min to max of 9 values:
  // exactly 80%). (Percentiles of the sample would cover less: the 10th to
  // 90th of 10 values, about 64%.)
  const std::size_t n = errors.size();
  const std::size_t j = std::max<std::size_t>(1, (n + 1) / 10);
  r.low = std::min(0.0, errors[std::min(j - 1, n - 1)]);
  r.high = std::max(0.0, errors[n >= j ? n - j : 0]);
  return r;
}

ErrorRange likelyErrorRange(const ComparableErrors& comparable) {
  ErrorRange r = likelyErrorRange(comparable.errors);
  for (double e : comparable.kindErrors) {
    r.low = std::min(r.low, e);
    r.high = std::max(r.high, e);
  }
  return r;
}


Configuration configurationOf(const ir::PhasePlan& phase) {
  Configuration c;
  c.family = familyOf(phase);
  c.chip = phase.pod.machine.chip.name;
  c.software = phase.software;
  c.ipus = phase.ipusUsed;
  c.accumulation = static_cast<double>(std::max<long long>(1, phase.batch.gradientAccumulation));
  c.microBatch = static_cast<double>(phase.batch.microBatch);
  for (const auto& ipu : phase.ipus)
    if (ipu.capacityBytes > 0) c.memory = std::max(c.memory, ipu.memory.total() / ipu.capacityBytes);
  c.phased = phase.mapping.phases > 1 || phase.mapping.weightsStreaming;
  c.recomputes = phase.mapping.recompute != ir::Recompute::None;
  return c;
}

std::vector<RegimeFlag> regimesOf(const Configuration& c, const std::vector<hw::Calibration::Row>& rows) {
  const std::string& family = c.family;
  std::vector<RegimeFlag> out;
  std::vector<const hw::Calibration::Row*> same;
  for (const auto& r : rows)
    if (r.family == family) same.push_back(&r);
  const bool otherModel = same.empty();
  if (otherModel) {
    out.push_back({Regime::OtherModel, std::string("no calibration row") + (c.chip.empty() ? "" : " of chip `" + c.chip + "`") +
                                           " has this model's kinds of layers (" + family +
                                           "): the estimate extrapolates the fit to another model"});
    // How it runs is still judged, against every row.
    for (const auto& r : rows) same.push_back(&r);
  }
  // A record holds the rows of every chip of its architecture; the clock
  // and what does not scale with it (links, host) differ between them.
  if (!otherModel && !c.chip.empty()) {
    std::set<std::string> ran;
    for (const auto* r : same)
      if (!r->chip.empty()) ran.insert(r->chip);
    if (!ran.empty() && ran.count(c.chip) == 0) {
      std::string names;
      for (const auto& n : ran) names += (names.empty() ? "`" : ", `") + n + "`";
      // A chip derived from a calibrated one (`chip X = GC200 with { ... }`)
      // keeps its calibration, whatever it changed: another clock only
      // scales compute, and other tiles or arithmetic make the fitted
      // efficiencies a guess.
      out.push_back({Regime::OtherChip, "no calibration row of this kind of model ran on chip `" + c.chip + "` (they ran on " +
                                            names + "): its estimate uses their fitted efficiencies, which another clock "
                                            "scales only in compute, and another design only by guess"});
    }
  }
  const char* kind = otherModel ? "no calibration row" : "no calibration row of this kind of model";
  const double ipus = c.ipus, ga = std::max(1.0, c.accumulation);
  // Nearby: a factor of 2 in IPUs (one pod size), a factor of 4 in accumulation.
  bool nearPod = false, nearGa = false;
  double minIpus = 1e300, maxIpus = 0, minGa = 1e300, maxGa = 0;
  for (const auto* r : same) {
    nearPod = nearPod || (ipus <= 2 * r->ipus && r->ipus <= 2 * ipus);
    nearGa = nearGa || (ga <= 4 * r->accumulation && r->accumulation <= 4 * ga);
    minIpus = std::min(minIpus, r->ipus);
    maxIpus = std::max(maxIpus, r->ipus);
    minGa = std::min(minGa, r->accumulation);
    maxGa = std::max(maxGa, r->accumulation);
  }
  if (!nearPod && !otherModel)
    out.push_back({Regime::PodSize, fmt("%.0f IPUs", ipus) + " is far from the calibration rows of this kind of model (" +
                                        fmt("%.0f", minIpus) + " to " + fmt("%.0f", maxIpus) + " IPUs)"});
  if (!nearGa && !otherModel)
    out.push_back({Regime::Accumulation, fmt("gradient accumulation %.0f", ga) +
                                             " is far from the calibration rows of this kind of model (" + fmt("%.0f", minGa) +
                                             " to " + fmt("%.0f", maxGa) + ")"});
  // Frameworks and releases differ in host work and compiled programs, which
  // the model does not price: a script that declares no software cannot be
  // said to be like any row (every row declares its own), and a framework or
  // release no row of the model's kind ran was never checked on this model.
  bool rowsDeclareSoftware = false;
  for (const auto& r : rows) rowsDeclareSoftware = rowsDeclareSoftware || (r.softwareRecorded && !frameworkOf(r.software).empty());
  if (frameworkOf(c.software).empty()) {
    if (rowsDeclareSoftware)
      out.push_back({Regime::NoSoftware, "no `software` declared: every calibration row ran a named framework and release, "
                                       "and frameworks differ in host work the model does not price; "
                                       "declare the training's `software` (\"popart sdk2.5\", \"pytorch sdk3.3\", ...)"});
  } else if (!otherModel) {
    const std::string fw = frameworkOf(c.software), release = releaseOf(c.software);
    bool anyRowRan = false, recorded = false, sameFramework = false, sameRelease = false;
    for (const auto& r : rows) anyRowRan = anyRowRan || (r.softwareRecorded && frameworkOf(r.software) == fw);
    std::set<std::string> releases;
    for (const auto* r : same) {
      if (!r->softwareRecorded) continue;
      recorded = true;
      if (frameworkOf(r->software) != fw) continue;
      sameFramework = true;
      releases.insert(releaseOf(r->software));
      sameRelease = sameRelease || releaseOf(r->software) == release;
    }
    if (recorded && !anyRowRan)
      out.push_back({Regime::OtherFramework, std::string("no calibration row") + (c.chip.empty() ? "" : " of chip `" + c.chip + "`") +
                                                 " ran framework `" + fw + "`: the model was never checked against it there"});
    else if (recorded && !sameFramework)
      out.push_back({Regime::FrameworkOfModel, "no calibration row of this kind of model ran framework `" + fw +
                                                   "`: the model was checked against it only on other models"});
    else if (recorded && !release.empty() && !sameRelease) {
      std::string ran;
      for (const auto& r : releases) ran += (ran.empty() ? "" : ", ") + (r.empty() ? std::string("(none named)") : r);
      out.push_back({Regime::Release, "release `" + release + "` of `" + fw + "`: no calibration row of this kind of model ran it (they ran " +
                                          ran + "), and releases change speed"});
    }
  }
  // The rest needs rows that record their regime (calibrations fitted since it was recorded).
  double minMb = 1e300, maxMb = 0, maxMemory = 0;
  bool anyDescribed = false, anyPhased = false, anyWithoutRecompute = false;
  for (const auto* r : same) {
    if (!r->described) continue;
    anyDescribed = true;
    minMb = std::min(minMb, r->microBatch);
    maxMb = std::max(maxMb, r->microBatch);
    maxMemory = std::max(maxMemory, r->memory);
    anyPhased = anyPhased || r->phased;
    anyWithoutRecompute = anyWithoutRecompute || !r->recomputes;
  }
  if (!anyDescribed) return out;
  const double mb = c.microBatch;
  if (!otherModel && mb > 0 && (mb < minMb || mb > maxMb))
    out.push_back({Regime::MicroBatch, fmt("micro batch %.0f", mb) + " is outside the calibration rows of this kind of model (" +
                                           fmt("%.0f", minMb) + " to " + fmt("%.0f", maxMb) + ")"});
  const double occupancy = c.memory;
  // Half a percent of slack: the same mapping planned again is not a new regime.
  if (!otherModel && occupancy > maxMemory + 0.005)
    out.push_back({Regime::MemoryOccupancy, fmt("the fullest IPU is %.1f%% full", 100 * occupancy) +
                                                ", fuller than any calibration row of this kind of model (at most " +
                                                fmt("%.1f%%", 100 * maxMemory) + ")"});
  if (c.phased && !anyPhased)
    out.push_back({Regime::Phased, "phased execution: " + std::string(kind) + " ran phased, so its Streaming Memory "
                                   "traffic and segment switches were never checked against a measurement"});
  if (!c.recomputes && !anyWithoutRecompute)
    out.push_back({Regime::NoRecompute, "no recomputation: " + std::string(kind) + " ran without recomputing, so the "
                                        "stash it keeps was never checked against a measurement"});
  return out;
}

ErrorRange worstErrors(const std::vector<hw::Calibration::Row>& rows) {
  ErrorRange worst;
  for (const auto& r : rows) {
    worst.low = std::min(worst.low, r.logoError);
    worst.high = std::max(worst.high, r.logoError);
  }
  return worst;
}

double leastErrorHigh(const Configuration& c, const std::vector<hw::Calibration::Row>& rows) {
  if (rows.empty()) return 0;
  double high = likelyErrorRange(comparableErrors(rows, c.family, c.ipus, std::max(1.0, c.accumulation))).high;
  for (const auto& f : regimesOf(c, rows))
    if (widensToWorstErrors(f.regime)) return std::max(high, worstErrors(rows).high);
  return high;
}

namespace {

// The interval and the regimes, from the calibration's rows and the
// assumptions' ranges.
void placeInCalibration(const ir::PhasePlan& phase, PhaseEstimate& e) {
  const auto& rows = phase.pod.machine.chip.calibration.rows;
  if (rows.empty() || !(e.samplesPerSecond > 0)) return;
  const Configuration config = configurationOf(phase);
  const ComparableErrors comparable = comparableErrors(rows, config.family, config.ipus, config.accumulation);
  ErrorRange range = likelyErrorRange(comparable);
  e.intervalBasis = comparable.basis;
  // A regime the model flagged already (a framework without a fitted cost) is said once.
  for (auto& f : regimesOf(config, rows)) {
    bool said = false;
    for (const auto& g : e.regimes) said = said || g.regime == f.regime;
    if (!said) e.regimes.push_back(std::move(f));
  }

  // An assumption the step time moves with by more than 1% over its range.
  double lowest = e.samplesPerSecond, highest = e.samplesPerSecond;
  bool rests = false;
  for (const auto& s : e.sensitivities) {
    lowest = std::min({lowest, s.samplesPerSecondAtLow, s.samplesPerSecondAtHigh});
    highest = std::max({highest, s.samplesPerSecondAtLow, s.samplesPerSecondAtHigh});
    const double moves = std::max(std::fabs(s.samplesPerSecondAtLow / e.samplesPerSecond - 1),
                                  std::fabs(s.samplesPerSecondAtHigh / e.samplesPerSecond - 1));
    if (moves <= 0.01) continue;
    rests = true;
    e.regimes.push_back({Regime::StreamingBandwidth,
                           "the estimate rests on the assumed " + std::string(name(s.range.assumption)) + " (" +
                               fmt("%.3g GB/s", s.range.nominal / 1e9) + "): " + fmt("%.0f", s.samplesPerSecondAtLow) +
                               " samples/s at " + fmt("%.3g GB/s", s.range.low / 1e9) + ", " +
                               fmt("%.0f", s.samplesPerSecondAtHigh) + " at " + fmt("%.3g GB/s", s.range.high / 1e9)});
  }

  // Outside the rows, the comparable rows' errors say nothing: the interval
  // takes the worst errors the fit made on a configuration group it had not
  // seen (leave-one-group-out, over every row of the chip).
  std::string outside;
  for (const auto& f : e.regimes)
    if (widensToWorstErrors(f.regime)) outside += (outside.empty() ? "" : ", ") + std::string(name(f.regime));
  if (!outside.empty()) {
    const ErrorRange worst = worstErrors(rows);
    const double worstLow = worst.low, worstHigh = worst.high;
    range.low = std::min(range.low, worstLow);
    range.high = std::max(range.high, worstHigh);
    e.intervalBasis += "; widened to the worst leave-one-group-out errors of all " + std::to_string(rows.size()) +
                       " rows (" + percent(worstLow) + " to " + percent(worstHigh) + ") because the phase is outside them (" +
                       outside + ")";
  }
  if (rests) e.intervalBasis += "; spanning the assumptions' ranges";
  // predicted = measured x (1 + error), so measured = predicted / (1 + error).
  e.errorLow = range.low;
  e.errorHigh = range.high;
  e.throughputLow = lowest / (1 + range.high);
  e.throughputHigh = highest / (1 + range.low);
}

}  // namespace

double stepOverhead(const hw::Calibration& cal, const std::string& software) { return softwareStepOverhead(cal, software, nullptr); }

double matmulShapeCost(double rows, double inner, double outputs, double tiles) { return shapeCost(rows, inner, outputs, tiles); }

const char* name(Regime r) {
  switch (r) {
    case Regime::OtherModel: return "other_model";
    case Regime::OtherFramework: return "other_framework";
    case Regime::OtherChip: return "other_chip";
    case Regime::FrameworkOfModel: return "framework_of_model";
    case Regime::Release: return "release";
    case Regime::NoSoftware: return "no_software";
    case Regime::PodSize: return "pod_size";
    case Regime::Accumulation: return "accumulation";
    case Regime::MicroBatch: return "micro_batch";
    case Regime::MemoryOccupancy: return "memory_occupancy";
    case Regime::Phased: return "phased";
    case Regime::NoRecompute: return "no_recompute";
    case Regime::StreamingBandwidth: return "streaming_bandwidth";
  }
  return "?";
}

bool widensToWorstErrors(Regime r) { return r != Regime::StreamingBandwidth; }

const char* name(Assumption a) {
  switch (a) {
    case Assumption::StreamingBandwidth: return "Streaming Memory bandwidth";
  }
  return "?";
}

std::vector<AssumedRange> assumedRanges(const hw::Machine& m) {
  std::vector<AssumedRange> out;
  if (m.streamingBandwidth > 0 && (m.streamingBandwidthLow > 0 || m.streamingBandwidthHigh > 0)) {
    AssumedRange r{Assumption::StreamingBandwidth, m.streamingBandwidth, m.streamingBandwidth, m.streamingBandwidth};
    // A range that leaves out the assumed value is widened to include it.
    if (m.streamingBandwidthLow > 0) r.low = std::min(m.streamingBandwidthLow, r.nominal);
    r.high = std::max(m.streamingBandwidthHigh, r.nominal);
    out.push_back(r);
  }
  return out;
}

PhaseEstimate estimatePhase(const ir::PhasePlan& phase, std::vector<Problem>* problems, const Hosting& hosting) {
  Model model(phase, problems, hosting);
  PhaseEstimate e = model.run();
  if (!e.ok) return e;
  // The Streaming Memory bandwidth is unpublished: a plan that streams is
  // priced again at the ends of its declared plausible range.
  bool streams = false;
  for (const auto& st : phase.traffic.streaming) streams = streams || st.optimizerState > 0 || st.phased() > 0;
  for (const AssumedRange& range : assumedRanges(phase.pod.machine)) {
    if (range.assumption == Assumption::StreamingBandwidth && !streams) continue;
    Sensitivity s{range};
    s.samplesPerSecondAtLow = model.samplesPerSecondAt(e, range.low);
    s.samplesPerSecondAtHigh = model.samplesPerSecondAt(e, range.high);
    e.sensitivities.push_back(s);
  }
  placeInCalibration(phase, e);
  return e;
}

Estimate estimate(const ir::ExecutionPlan& plan, const Hosting& hosting) {
  Estimate out;
  for (const auto& run : plan.runs) {
    RunEstimate r;
    r.name = run.name;
    for (const auto& ph : run.phases) {
      r.phases.push_back(estimatePhase(ph, &out.problems, hosting));
      r.timeToTrain += r.phases.back().timeToTrain;
    }
    out.runs.push_back(std::move(r));
  }
  return out;
}

ir::Json toJson(const PhaseEstimate& e) {
  ir::Json j = ir::Json::object();
  j["name"] = e.name;
  j["ok"] = e.ok;
  j["instances"] = e.instances;
  j["step_time_s"] = e.stepTime;
  j["throughput_samples_per_s"] = e.samplesPerSecond;
  j["throughput_tokens_per_s"] = e.tokensPerSecond > 0 ? ir::Json(e.tokensPerSecond) : ir::Json();
  j["steps"] = e.steps;
  j["time_to_train_s"] = e.timeToTrain;
  j["pipeline_cycles"] = e.cycles;
  j["cycle_time_s"] = e.cycleTime;
  j["pipeline_utilisation"] = e.pipelineUtilisation;
  j["peak_memory_bytes"] = e.peakMemoryBytes;
  j["fits"] = e.fits;
  const Breakdown& b = e.breakdown;
  ir::Json bd = ir::Json::object();
  bd["compute"] = b.compute;
  bd["recompute"] = b.recompute;
  bd["pipeline_fill_drain"] = b.pipelineFillDrain;
  bd["stage_imbalance"] = b.stageImbalance;
  bd["exchange"] = b.exchange;
  bd["all_reduce"] = b.allReduce;
  bd["rts_collectives"] = b.rtsCollectives;
  bd["across_instances"] = b.acrossInstances;
  bd["streaming"] = b.streaming;
  bd["optimizer"] = b.optimizer;
  bd["host_io"] = b.hostIo;
  bd["overhead"] = b.overhead;
  j["breakdown_s"] = std::move(bd);
  ir::Json ipus = ir::Json::array();
  for (const auto& it : e.ipus) {
    ir::Json ij = ir::Json::object();
    ij["ipu"] = it.ipu;
    ij["forward_s"] = it.forward;
    ij["backward_s"] = it.backward;
    ij["recompute_s"] = it.recompute;
    ij["exchange_s"] = it.exchange;
    ij["compute_utilisation"] = it.utilisation;
    ij["memory_bytes"] = it.memoryBytes;
    ij["memory_capacity_bytes"] = it.capacityBytes;
    ipus.push(std::move(ij));
  }
  j["ipus"] = std::move(ipus);
  j["calibration"] = e.calibration;
  ir::Json as = ir::Json::array();
  for (const auto& a : e.assumptions) as.push(a);
  j["assumptions"] = std::move(as);
  if (e.throughputHigh > 0) {
    ir::Json iv = ir::Json::array();
    iv.push(e.throughputLow);
    iv.push(e.throughputHigh);
    j["throughput_interval"] = std::move(iv);
  } else {
    j["throughput_interval"] = ir::Json();
  }
  ir::Json cw = ir::Json::array(), rg = ir::Json::array();
  for (const auto& f : e.regimes) {
    cw.push(f.message);
    rg.push(name(f.regime));
  }
  j["coverage_warnings"] = std::move(cw);
  j["regimes"] = std::move(rg);
  ir::Json sens = ir::Json::array();
  for (const auto& s : e.sensitivities) {
    ir::Json sj = ir::Json::object();
    sj["assumption"] = name(s.range.assumption);
    sj["nominal"] = s.range.nominal;
    sj["low"] = s.range.low;
    sj["high"] = s.range.high;
    sj["samples_per_s_at_low"] = s.samplesPerSecondAtLow;
    sj["samples_per_s_at_high"] = s.samplesPerSecondAtHigh;
    sens.push(std::move(sj));
  }
  j["sensitivities"] = std::move(sens);
  return j;
}

ir::Json toJson(const Estimate& e) {
  ir::Json j = ir::Json::object();
  j["format"] = "ipu-estimate/1";
  ir::Json runs = ir::Json::array();
  for (const auto& r : e.runs) {
    ir::Json rj = ir::Json::object();
    rj["name"] = r.name;
    rj["time_to_train_s"] = r.timeToTrain;
    ir::Json phases = ir::Json::array();
    for (const auto& ph : r.phases) phases.push(toJson(ph));
    rj["phases"] = std::move(phases);
    if (r.hooks) {
      ir::Json hj = ir::Json::object();
      hj["stopped"] = r.hooks->stopped;
      hj["stop_reason"] = r.hooks->stopped ? ir::Json(r.hooks->stopReason) : ir::Json();
      hj["time_to_train_s"] = r.hooks->timeToTrain;
      ir::Json hp = ir::Json::array();
      for (const auto& sp : r.hooks->phases) {
        ir::Json pj = ir::Json::object();
        pj["name"] = sp.name;
        pj["steps"] = sp.steps;
        pj["steps_run"] = sp.stepsRun;
        pj["time_to_train_s"] = sp.timeToTrain;
        ir::Json logged = ir::Json::object();
        for (const auto& [k, v] : sp.logged) logged[k] = v;
        pj["logged"] = std::move(logged);
        hp.push(std::move(pj));
      }
      hj["phases"] = std::move(hp);
      rj["hooks"] = std::move(hj);
    }
    runs.push(std::move(rj));
  }
  j["runs"] = std::move(runs);
  return j;
}

}  // namespace ipu::cost
