#include "runtime/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "runtime/cost/codes.h"

namespace ipu::cost {

const std::vector<CodeTitle>& costCodes() {
  static const std::vector<CodeTitle> codes = {
      {code::kNoCalibration, "a chip without a calibration: its speed is unknown"},
      {code::kMissingHardware, "a chip or machine missing a figure the estimate needs (a bandwidth)"},
  };
  return codes;
}

double Breakdown::total() const {
  return compute + recompute + pipelineFillDrain + stageImbalance + exchange + allReduce + rtsCollectives + streaming +
         optimizer + hostIo + overhead;
}

namespace {

std::string gbps(double bytesPerSecond) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytesPerSecond / 1e9);
  return buf;
}

// Bandwidths the estimate derives from the hardware description. The
// assumptions are stated in docs/cost-model.md.
struct Links {
  double collective = 0;  // ring all-reduce bandwidth per IPU inside a rack: 4 IPU-Links, each way
  double pointToPoint = 0;  // between pipeline neighbours: 2 IPU-Links, each way
  double gateway = 0;     // per IPU across racks (GW-Links)
  double host = 0;        // per IPU to the host
  double streaming = 0;   // per IPU to Streaming Memory
};

struct LayerTime {
  double forward = 0, backward = 0, recompute = 0, exchange = 0;  // seconds per micro batch on one IPU
  double flops = 0;                                              // FLOPs per micro batch on one IPU (with recompute)
};

class Model {
 public:
  Model(const ir::PhasePlan& p, std::vector<Problem>* problems) : p_(p), problems_(problems) {}

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
    const int S = static_cast<int>(p_.stages.size());
    const long long ga = std::max<long long>(1, p_.batch.gradientAccumulation);
    const bool needLinks = S > 1 || t_ > 1 || r_ > 1;
    if (needLinks && !(chip.ipuLinkBandwidth > 0)) {
      problem(code::kMissingHardware, "chip `" + chip.name + "` has no `ipu_link_bandwidth`, which this mapping's communication needs",
              "give the chip `ipu_links` and `ipu_link_bandwidth`");
      return e;
    }

    // Per layer, per micro batch, on one IPU of its shard group.
    std::vector<LayerTime> lt(p_.layers.size());
    for (std::size_t i = 0; i < p_.layers.size(); ++i) lt[i] = layerTime(p_.layers[i], cal);

    // Stage boundaries: activations cross into and out of each stage in the
    // forward pass, and their gradients in the backward pass.
    for (const auto& st : p_.stages) {
      double boundary = 0;
      if (st.index > 0) boundary += p_.layers[static_cast<std::size_t>(st.layers.front())].inputElements * bc_;
      if (st.index < S - 1) boundary += p_.layers[static_cast<std::size_t>(st.layers.back())].outputElements * bc_;
      boundaryTime_[st.ipu] += 2 * boundary / links_.pointToPoint;
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
      it.exchange += lt[i].exchange;
      it.flopsPerStep += lt[i].flops * static_cast<double>(ga);
    }
    for (auto& it : ipus) it.exchange += boundaryTime_[it.ipu];
    for (const auto& ipu : p_.ipus) {
      IpuTime& it = ipus[static_cast<std::size_t>(std::clamp(ipu.ipu, 0, P - 1))];
      it.memoryBytes = std::max(it.memoryBytes, ipu.memory.total());
      it.capacityBytes = ipu.capacityBytes;
      e.peakMemoryBytes = std::max(e.peakMemoryBytes, ipu.memory.total());
    }
    e.fits = p_.fits;

    // The pipeline: PopART's schedule takes GA + 2S - 2 cycles for S forward
    // stages (fill, steady state, drain), and every cycle lasts as long as the
    // busiest IPU's work for one micro batch (Graphcore: "the slowest stage
    // sets the cycle"; idle IPUs wait at the cycle's synchronisation).
    const long long cycles = S > 1 ? ga + 2 * S - 2 : ga;
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
    const double pipelineTime = static_cast<double>(cycles) * maxBusy;
    b.pipelineFillDrain = static_cast<double>(cycles - ga) * maxBusy;

    collectives(b, e, cal);
    optimizerAndStreaming(b, e, pipelineTime);
    hostIo(b, pipelineTime, gad);
    b.overhead = cal.stepOverheadSeconds;

    e.stepTime = b.total();
    e.cycles = static_cast<int>(cycles);
    e.cycleTime = maxBusy;
    e.pipelineUtilisation = pipelineTime > 0 ? gad * meanBusy / pipelineTime : 0;
    const double samples = static_cast<double>(p_.batch.globalBatch) * std::max(1.0, p_.dataset.sequencesPerPack);
    e.samplesPerSecond = e.stepTime > 0 ? samples / e.stepTime : 0;
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

  // A layer on one IPU of its shard group, for one micro batch.
  LayerTime layerTime(const ir::Layer& l, const hw::Calibration& cal) const {
    const double share = l.shardable ? 1.0 / t_ : 1.0;
    auto dense = [&](const ir::Flops& f) {
      return share * (f.matmul / (peak_ * cal.matmulEfficiency) +
                      f.attention / (peak_ * cal.matmulEfficiency * cal.attentionFactor) +
                      f.conv / (peak_ * cal.convEfficiency) + f.elementwise / elementwiseRate_);
    };
    LayerTime x;
    x.forward = dense(l.forward) + l.ops * opLatency_;
    x.backward = dense(l.backward) + 2 * l.ops * opLatency_;
    const bool recompute = p_.mapping.recompute != ir::Recompute::None;
    x.recompute = recompute ? x.forward : 0;
    x.flops = share * (l.forward.total() * (recompute ? 2 : 1) + l.backward.total());
    // Tensor sharding: an all-reduce of the layer's output in each forward pass
    // (and recomputation) and of its input gradient in the backward pass.
    if (l.shardable && t_ > 1) {
      double bytes = l.outputElements * bc_;
      double ring = 2.0 * (t_ - 1) / t_ * bytes / links_.collective + 2.0 * (t_ - 1) * opLatency_;
      x.exchange = ring * (recompute ? 3 : 2);
    }
    return x;
  }

  // Gradient reduction across replicas: a ring inside each rack over
  // IPU-Links, and between racks over GW-Links (hierarchically). With
  // replicated tensor sharding of the optimizer state it is a reduce-scatter,
  // then the updated weights are all-gathered.
  void collectives(Breakdown& b, PhaseEstimate& e, const hw::Calibration&) {
    if (r_ <= 1) return;
    double weights = 0;
    for (const auto& ipu : p_.ipus) {
      double w = 0;
      for (int li : ipu.layers) {
        const ir::Layer& l = p_.layers[static_cast<std::size_t>(li)];
        w += l.shardable ? l.params / t_ : l.params;
      }
      weights = std::max(weights, w);
    }
    const double used = static_cast<double>(p_.ipusUsed);
    const double rackIpus = std::max(1, p_.pod.ipusPerRack());
    const double racks = std::max(1.0, std::ceil(used / rackIpus));
    const double inRack = std::max(1.0, r_ / racks);
    auto allReduce = [&](double bytes) {
      double t = 2 * (inRack - 1) / inRack * bytes / links_.collective + 2 * (inRack - 1) * opLatency_;
      if (racks > 1) {
        if (!(links_.gateway > 0)) return std::numeric_limits<double>::infinity();
        t += 2 * (racks - 1) / racks * (bytes / inRack) / links_.gateway + 2 * (racks - 1) * opLatency_;
      }
      return t;
    };
    const double grads = weights * ir::bytesOf(p_.precision.accumulators);
    const ir::Mapping& map = p_.mapping;
    if (racks > 1 && !(links_.gateway > 0)) {
      problem(code::kMissingHardware, "machine `" + p_.pod.machine.name + "` has no `gw_link_bandwidth`, which reducing across racks needs",
              "give the machine `gw_link_bandwidth`");
      return;
    }
    if (map.rtsOptimizerState) {
      b.allReduce = allReduce(grads) / 2;  // reduce-scatter
      b.rtsCollectives = allReduce(weights * ir::bytesOf(p_.precision.weights)) / 2;  // all-gather
    } else {
      b.allReduce = allReduce(grads);
    }
    if (racks > 1)
      e.assumptions.push_back("across racks, gradients travel over GW-Links at " + gbps(links_.gateway) + " per IPU");
  }

  // The weight update reads and writes weights, accumulators and state in
  // SRAM; offloaded state (or phased execution) adds Streaming Memory traffic.
  void optimizerAndStreaming(Breakdown& b, PhaseEstimate& e, double pipelineTime) {
    const hw::Chip& chip = p_.pod.machine.chip;
    const ir::Mapping& map = p_.mapping;
    const ir::Precision& prec = p_.precision;
    const double stateBytes = p_.optimizer.moments * ir::bytesOf(prec.optimizerState) + (prec.masterWeights ? 4.0 : 0.0);
    const double rtsO = map.rtsOptimizerState ? r_ : 1, rtsW = map.rtsWeights ? r_ : 1;
    double worstUpdate = 0, worstStream = 0, worstStateStream = 0;
    for (const auto& ipu : p_.ipus) {
      if (ipu.shard != 0) continue;
      double w = 0, stash = 0, layers = 0;
      for (int li : ipu.layers) {
        const ir::Layer& l = p_.layers[static_cast<std::size_t>(li)];
        w += l.shardable ? l.params / t_ : l.params;
        stash += l.inputElements;
        layers += 1;
      }
      const double updated = w / rtsO;
      const double sram = updated * (2 * ir::bytesOf(prec.weights) + ir::bytesOf(prec.accumulators) + 2 * stateBytes);
      double update = (chip.memoryBandwidth > 0 ? sram / chip.memoryBandwidth : 0) + layers * 4 * opLatency_;
      worstUpdate = std::max(worstUpdate, update);
      const bool phased = map.phases > 1 || map.weightsStreaming;
      if (map.optimizerStateStreaming || phased) worstStateStream = std::max(worstStateStream, 2 * updated * stateBytes);
      if (phased) {
        // Each sub-graph's weights stream in for the forward and the backward
        // pass, its gradients out, and the stash goes out and back per micro batch.
        double bytes = 2 * w * ir::bytesOf(prec.weights) / rtsW + w * ir::bytesOf(prec.accumulators) / rtsO +
                       2 * static_cast<double>(p_.batch.gradientAccumulation) * stash * bc_;
        worstStream = std::max(worstStream, bytes);
        if (map.rtsWeights && r_ > 1)
          b.rtsCollectives += 2 * (r_ - 1.0) / r_ * w * ir::bytesOf(prec.weights) / links_.collective;
      }
    }
    b.optimizer = worstUpdate;
    if (worstStateStream > 0 || worstStream > 0) {
      if (!(links_.streaming > 0)) {
        problem(code::kMissingHardware, "machine `" + p_.pod.machine.name + "` has no `streaming_bandwidth`, which offloading needs",
                "give the machine `streaming_bandwidth`");
        return;
      }
      // State streams during the update (not hidden); phased traffic overlaps compute.
      b.streaming = std::max(0.0, worstStateStream / links_.streaming - worstUpdate) +
                    std::max(0.0, worstStream / links_.streaming - pipelineTime);
      e.assumptions.push_back("Streaming Memory bandwidth " + gbps(links_.streaming) +
                              " per IPU is an assumption: Graphcore does not publish it");
    }
  }

  // Each replica's data arrives over its machine's host link while the
  // previous step computes; only what is not hidden counts.
  void hostIo(Breakdown& b, double pipelineTime, double ga) {
    if (p_.layers.empty() || !(links_.host > 0)) return;
    const double bytes = ga * p_.layers.front().inputElements * bc_;
    b.hostIo = std::max(0.0, bytes / links_.host - pipelineTime);
  }

  const ir::PhasePlan& p_;
  std::vector<Problem>* problems_;
  double peak_ = 0, clock_ = 0, bc_ = 2, opLatency_ = 0, elementwiseRate_ = 0;
  int t_ = 1, r_ = 1;
  Links links_;
  std::map<int, double> boundaryTime_;
};

}  // namespace

PhaseEstimate estimatePhase(const ir::PhasePlan& phase, std::vector<Problem>* problems) {
  return Model(phase, problems).run();
}

Estimate estimate(const ir::ExecutionPlan& plan) {
  Estimate out;
  for (const auto& run : plan.runs) {
    RunEstimate r;
    r.name = run.name;
    for (const auto& ph : run.phases) {
      r.phases.push_back(estimatePhase(ph, &out.problems));
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
