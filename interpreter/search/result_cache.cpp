#include "interpreter/search/result_cache.h"

#include <cinttypes>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <filesystem>
#include <link.h>
#include <sys/stat.h>

#include "interpreter/plan/planner.h"
#include "interpreter/search/layer_costs.h"
#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"
#include "runtime/ir/mapping_fields.h"
#include "runtime/ir/sha256.h"

namespace ipu::search {

namespace {

constexpr const char* kFormat = "ipu-search-cache/1";

// ------------------------------------------------------------------ the build

// The GNU build ID of the running executable: a digest of its code, so any
// change of the search, the planner or the cost model gives another key.
int readBuildId(struct dl_phdr_info* info, std::size_t, void* out) {
  auto* id = static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (desc + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char* digits = "0123456789abcdef";
        for (std::uint32_t k = 0; k < note->n_descsz; ++k) {
          *id += digits[desc[k] >> 4];
          *id += digits[desc[k] & 15];
        }
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // the first object is the executable: stop there
}

// Without a build ID (a linker told not to write one), the executable's
// size, modification time and inode: a rebuild changes them.
std::optional<std::string> buildIdentity() {
  static const std::optional<std::string> identity = []() -> std::optional<std::string> {
    std::string id;
    dl_iterate_phdr(readBuildId, &id);
    if (!id.empty()) return "build-id " + id;
    struct stat st {};
    if (::stat("/proc/self/exe", &st) != 0) return std::nullopt;
    return "executable " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
  }();
  return identity;
}

// -------------------------------------------------------------------- the key

// Everything the search reads, one `name value` line each: text with its
// length (so no two inputs write the same lines), numbers exactly.
class KeyWriter {
 public:
  void put(const char* name, const std::string& text) { line(name, std::to_string(text.size()) + ":" + text); }
  void put(const char* name, const char* text) { put(name, std::string(text)); }
  void put(const char* name, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", x);
    line(name, buf);
  }
  void put(const char* name, long long x) { line(name, std::to_string(x)); }
  void put(const char* name, int x) { line(name, std::to_string(x)); }
  void put(const char* name, bool x) { line(name, x ? "true" : "false"); }
  // A JSON value written by the table of mapping fields, its numbers exactly.
  void json(const char* name, const nlohmann::ordered_json& j) { put(name, j.dump()); }
  std::string hex() { return h_.hex(); }

 private:
  void line(const char* name, const std::string& value) {
    h_.add(name);
    h_.add(" ");
    h_.add(value);
    h_.add("\n");
  }
  ir::Sha256 h_;
};

void putPod(KeyWriter& k, const hw::Pod& pod) {
  k.put("pod", pod.name);
  k.put("machines", pod.machines);
  k.put("machines_per_rack", pod.machinesPerRack);
  k.put("power_of_two_replicas", pod.powerOfTwoReplicas);
  const hw::Machine& m = pod.machine;
  k.put("machine", m.name);
  k.put("machine.ipus", m.ipus);
  k.put("machine.streaming_memory", m.streamingMemoryBytes);
  k.put("machine.streaming_bandwidth", m.streamingBandwidth);
  k.put("machine.streaming_bandwidth_low", m.streamingBandwidthLow);
  k.put("machine.streaming_bandwidth_high", m.streamingBandwidthHigh);
  k.put("machine.gw_link_bandwidth", m.gwLinkBandwidth);
  k.put("machine.gw_link_latency", m.gwLinkLatencySeconds);
  k.put("machine.host_bandwidth", m.hostBandwidth);
  k.put("machine.host_network_bandwidth", m.hostNetworkBandwidth);
  k.put("machine.host_network_latency", m.hostNetworkLatencySeconds);
  k.put("machine.host_cores", m.hostCores);
  k.put("machine.host_storage_bandwidth", m.hostStorageBandwidth);
  const hw::Chip& c = m.chip;
  k.put("chip", c.name);
  k.put("chip.clock", c.clockHz);
  k.put("chip.tiles", c.tiles);
  k.put("chip.memory", c.memoryBytes);
  k.put("chip.fp16_flops_per_cycle", c.fp16FlopsPerCycle);
  k.put("chip.fp32_flops_per_cycle", c.fp32FlopsPerCycle);
  k.put("chip.memory_bandwidth", c.memoryBandwidth);
  k.put("chip.exchange_bandwidth", c.exchangeBandwidth);
  k.put("chip.ipu_links", c.ipuLinks);
  k.put("chip.ipu_link_bandwidth", c.ipuLinkBandwidth);
  k.put("chip.code_base", c.codeBaseBytes);
  const hw::Calibration& cal = c.calibration;
  k.put("calibration", cal.present);
  k.put("calibration.source", cal.source);
  k.put("calibration.matmul_efficiency", cal.matmulEfficiency);
  k.put("calibration.conv_efficiency", cal.convEfficiency);
  k.put("calibration.attention_factor", cal.attentionFactor);
  k.put("calibration.op_latency_cycles", cal.opLatencyCycles);
  k.put("calibration.step_overhead", cal.stepOverheadSeconds);
  k.put("calibration.update_per_parameter", cal.updateSecondsPerParameter);
  k.put("calibration.gw_latency", cal.gwLatencySeconds);
  for (const auto& [software, seconds] : cal.softwareStepOverhead) {
    k.put("calibration.software", software);
    k.put("calibration.software.step_overhead", seconds);
  }
  for (const auto& r : cal.rows) {
    k.put("calibration.row", r.family);
    k.put("calibration.row.ipus", r.ipus);
    k.put("calibration.row.accumulation", r.accumulation);
    k.put("calibration.row.loo_error", r.looError);
    k.put("calibration.row.logo_error", r.logoError);
    k.put("calibration.row.described", r.described);
    k.put("calibration.row.micro_batch", r.microBatch);
    k.put("calibration.row.memory", r.memory);
    k.put("calibration.row.phased", r.phased);
    k.put("calibration.row.recomputes", r.recomputes);
    k.put("calibration.row.software_recorded", r.softwareRecorded);
    k.put("calibration.row.software", r.software);
    k.put("calibration.row.chip", r.chip);
  }
}

void putPhase(KeyWriter& k, const check::PhaseSpec& ph) {
  k.put("phase", ph.name);
  k.put("from", ph.from);
  k.put("model", ph.model->name);
  k.put("model.parameters", ph.model->parameters);
  k.put("model.family", ph.model->family);
  k.put("micro_batch", ph.batch.microBatch);
  k.put("gradient_accumulation", ph.batch.gradientAccumulation);
  k.put("replicas", ph.batch.replicas);
  k.put("global_batch", ph.batch.globalBatch);
  k.put("derived", ir::nameOf(ph.batch.derived));
  k.put("seq_len", ph.seqLen);
  k.put("masked_tokens", ph.maskedTokens);
  k.put("image_size", ph.imageSize);
  k.put("steps", ph.steps);
  k.put("epochs", ph.epochs);
  k.put("label_smoothing", ph.labelSmoothing);
  k.put("software", ph.software);
  k.put("device_iterations", ph.deviceIterations);
  const ir::Precision& p = ph.precision;
  k.put("precision", p.name);
  k.put("precision.compute", ir::name(p.compute));
  k.put("precision.weights", ir::name(p.weights));
  k.put("precision.master_weights", p.masterWeights);
  k.put("precision.partials", ir::name(p.partials));
  k.put("precision.accumulators", ir::name(p.accumulators));
  k.put("precision.optimizer_state", ir::name(p.optimizerState));
  k.put("precision.stochastic_rounding", p.stochasticRounding);
  k.put("precision.loss_scale", ir::nameOf(p.lossScale.kind));
  k.put("precision.loss_scale.lua", p.lossScale.luaFunction);
  k.put("precision.loss_scale.value", p.lossScale.value);
  k.put("precision.loss_scale.factor", p.lossScale.factor);
  k.put("precision.loss_scale.interval", p.lossScale.interval);
  const ir::Optimizer& o = ph.optimizer;
  k.put("optimizer", o.name);
  k.put("optimizer.kind", ir::nameOf(o.kind));
  k.put("optimizer.beta1", o.beta1);
  k.put("optimizer.beta2", o.beta2);
  k.put("optimizer.epsilon", o.epsilon);
  k.put("optimizer.weight_decay", o.weightDecay);
  k.put("optimizer.momentum", o.momentum);
  k.put("optimizer.trust_coefficient", o.trustCoefficient);
  k.put("optimizer.clip_norm", o.clipNorm);
  k.put("optimizer.bias_correction", o.biasCorrection);
  k.put("optimizer.nesterov", o.nesterov);
  for (ir::ParamClass c : o.exclude) k.put("optimizer.exclude", ir::nameOf(c));
  k.put("optimizer.moments", o.moments);
  const ir::LrSchedule& lr = ph.lr;
  k.put("lr.base", lr.base);
  k.put("lr.per", lr.per);
  k.put("lr.peak", lr.peak);
  k.put("lr.warmup_steps", lr.warmupSteps);
  k.put("lr.decay", ir::nameOf(lr.decay));
  k.put("lr.end", lr.end);
  k.put("lr.power", lr.power);
  k.put("lr.lua", lr.luaFunction);
  const ir::Dataset& d = ph.dataset;
  k.put("dataset", d.name);
  k.put("dataset.kind", ir::nameOf(d.kind));
  k.put("dataset.path", d.path);
  k.put("dataset.samples", d.samples);
  k.put("dataset.packing", d.packing);
  k.put("dataset.sequences_per_pack", d.sequencesPerPack);
  k.put("dataset.mask_probability", d.maskProbability);
  k.put("dataset.host_work", d.hostWorkSeconds);
  k.put("dataset.sample_bytes", d.sampleBytes);
}

void putMapping(KeyWriter& k, const check::MappingSpec& m) {
  k.put("mapping", m.name);
  k.put("mapping.pipeline", ir::nameOf(m.pipelineKind));
  k.put("mapping.pipeline_ipus", m.pipelineIpus);
  k.put("mapping.lua", m.luaFunction);
  k.put("mapping.placement_errors", m.placementErrors);
  for (const auto& s : m.stages) {
    k.put("mapping.stage", s.ipu);
    for (int leaf : s.leaves) k.put("mapping.stage.layer", leaf);
  }
  // Every setting, through the table of mapping fields (numbers exactly).
  ir::Json settings = ir::Json::object();
  ir::writeMappingJson(m.mapping, settings);
  k.json("mapping.settings", settings);
  if (m.search) {
    k.put("mapping.search.objective", check::nameOf(m.search->objective));
    k.put("mapping.search.max_ipus", m.search->maxIpus);
    k.put("mapping.search.headroom", m.search->headroom);
  }
  putPod(k, m.pod);
}

void putFlops(KeyWriter& k, const char* name, const ir::Flops& f) {
  k.put(name, f.matmul);
  k.put(name, f.attention);
  k.put(name, f.conv);
  k.put(name, f.elementwise);
}

void putLayers(KeyWriter& k, const std::vector<check::LayerFacts>& layers) {
  for (const auto& l : layers) {
    k.put("layer", l.path);
    k.put("layer.op", l.op);
    k.put("layer.definition", l.definition);
    k.put("layer.params", l.params);
    k.put("layer.params_unknown", l.paramsUnknown);
    k.put("layer.tied_to", l.tiedTo);
    k.put("layer.tied_params", l.tiedParams);
    k.put("layer.shardable", l.shardable);
    putFlops(k, "layer.forward", l.forward);
    putFlops(k, "layer.backward", l.backward);
    k.put("layer.activations", l.activations);
    k.put("layer.input", l.input);
    k.put("layer.output", l.output);
    k.put("layer.workspace", l.workspace);
    k.put("layer.code", l.codeBytes);
    k.put("layer.ops", l.ops);
    for (const auto& a : l.attributes) {
      k.put("layer.attribute", a.name);
      k.put("layer.attribute.number", a.number);
      k.put("layer.attribute.text", a.text);
    }
  }
}

// ------------------------------------------------------------- the results

ir::Json rangeJson(const cost::AssumedRange& r) {
  return ir::Json({{"assumption", cost::name(r.assumption)}, {"nominal", r.nominal}, {"low", r.low}, {"high", r.high}});
}

// A closed enum back from the name its own name() gives: every value of its
// underlying type that has one is tried, so a value added later reads back
// without a list here to update.
template <typename E>
std::optional<E> enumNamed(const std::string& text) {
  for (int i = 0; i < 256; ++i)
    if (text == cost::name(static_cast<E>(i))) return static_cast<E>(i);
  return std::nullopt;
}

ir::Json candidateJson(const Candidate& c) {
  ir::Json j = ir::Json::object();
  j["shard"] = c.shard;
  j["pipeline"] = c.pipeline;
  j["replicas"] = c.replicas;
  j["phases"] = c.phases;
  j["micro_batch"] = c.microBatch;
  j["gradient_accumulation"] = c.gradientAccumulation;
  j["recompute"] = ir::name(c.recompute);
  j["optimizer_state_streaming"] = c.optimizerStateStreaming;
  j["weights_streaming"] = c.weightsStreaming;
  j["rts_optimizer_state"] = c.rtsOptimizerState;
  j["rts_weights"] = c.rtsWeights;
  j["split"] = name(c.split);
  ir::Json stages = ir::Json::array();
  for (const auto& [ipu, layers] : c.stages) stages.push(ir::Json({ipu, layers}));
  j["stages"] = stages;
  j["layers_per_ipu"] = c.layersPerIpu;
  j["ipus_used"] = c.ipusUsed;
  j["fits"] = c.fits;
  j["step_time"] = c.stepTime;
  j["samples_per_second"] = c.samplesPerSecond;
  j["tokens_per_second"] = c.tokensPerSecond;
  j["time_to_train"] = c.timeToTrain;
  j["peak_memory_bytes"] = c.peakMemoryBytes;
  j["capacity_bytes"] = c.capacityBytes;
  j["peak_ipu"] = c.peakIpu;
  j["peak_component"] = c.peakComponent;
  j["peak_component_bytes"] = c.peakComponentBytes;
  j["streaming_bytes"] = c.streamingBytes;
  j["streaming_capacity_bytes"] = c.streamingCapacityBytes;
  j["streaming_ipu"] = c.streamingIpu;
  j["in_processor_over"] = c.inProcessorOver;
  j["throughput_low"] = c.throughputLow;
  j["throughput_high"] = c.throughputHigh;
  ir::Json regimes = ir::Json::array();
  for (const auto& f : c.regimes) regimes.push(ir::Json({{"regime", cost::name(f.regime)}, {"message", f.message}}));
  j["regimes"] = regimes;
  ir::Json sensitivities = ir::Json::array();
  for (const auto& x : c.sensitivities)
    sensitivities.push(ir::Json({{"range", rangeJson(x.range)},
                                 {"samples_per_second_at_low", x.samplesPerSecondAtLow},
                                 {"samples_per_second_at_high", x.samplesPerSecondAtHigh}}));
  j["sensitivities"] = sensitivities;
  const cost::Breakdown& b = c.breakdown;
  j["breakdown"] = ir::Json(nlohmann::ordered_json::array({b.compute, b.recompute, b.pipelineFillDrain, b.stageImbalance, b.exchange, b.allReduce,
                                    b.rtsCollectives, b.acrossInstances, b.streaming, b.optimizer, b.hostIo, b.overhead}));
  j["error_high"] = c.errorHigh;
  j["ranked_step"] = c.rankedStep;
  j["score"] = c.score;
  return j;
}

// Reads a cache file's JSON back; `ok` turns false at the first value that
// is missing or of another type (a damaged file is then ignored).
class Reader {
 public:
  bool ok = true;
  template <typename T>
  void number(const nlohmann::ordered_json& j, const char* key, T& out) {
    const auto it = j.find(key);
    if (!j.is_object() || it == j.end() || !it->is_number()) {
      ok = false;
      return;
    }
    out = it->template get<T>();
  }
  void flag(const nlohmann::ordered_json& j, const char* key, bool& out) {
    const auto it = j.find(key);
    if (!j.is_object() || it == j.end() || !it->is_boolean()) {
      ok = false;
      return;
    }
    out = it->get<bool>();
  }
  void text(const nlohmann::ordered_json& j, const char* key, std::string& out) {
    const auto it = j.find(key);
    if (!j.is_object() || it == j.end() || !it->is_string()) {
      ok = false;
      return;
    }
    out = it->get<std::string>();
  }
  const nlohmann::ordered_json* array(const nlohmann::ordered_json& j, const char* key) {
    const auto it = j.find(key);
    if (!j.is_object() || it == j.end() || !it->is_array()) {
      ok = false;
      return nullptr;
    }
    return &*it;
  }
  template <typename E>
  void named(const nlohmann::ordered_json& j, const char* key, E& out) {
    std::string text;
    this->text(j, key, text);
    if (auto e = enumNamed<E>(text)) out = *e;
    else ok = false;
  }
  cost::AssumedRange range(const nlohmann::ordered_json& j) {
    cost::AssumedRange r{cost::Assumption::StreamingBandwidth};
    named(j, "assumption", r.assumption);
    number(j, "nominal", r.nominal);
    number(j, "low", r.low);
    number(j, "high", r.high);
    return r;
  }
  std::vector<int> ints(const nlohmann::ordered_json& a) {
    std::vector<int> out;
    if (!a.is_array()) ok = false;
    else
      for (const auto& x : a) {
        if (!x.is_number_integer()) ok = false;
        else out.push_back(x.get<int>());
      }
    return out;
  }
};

std::optional<Candidate> candidateFromJson(const nlohmann::ordered_json& j) {
  Reader r;
  Candidate c;
  r.number(j, "shard", c.shard);
  r.number(j, "pipeline", c.pipeline);
  r.number(j, "replicas", c.replicas);
  r.number(j, "phases", c.phases);
  r.number(j, "micro_batch", c.microBatch);
  r.number(j, "gradient_accumulation", c.gradientAccumulation);
  std::string recompute, split;
  r.text(j, "recompute", recompute);
  if (auto rc = ir::recomputeFromName(recompute)) c.recompute = *rc;
  else r.ok = false;
  r.flag(j, "optimizer_state_streaming", c.optimizerStateStreaming);
  r.flag(j, "weights_streaming", c.weightsStreaming);
  r.flag(j, "rts_optimizer_state", c.rtsOptimizerState);
  r.flag(j, "rts_weights", c.rtsWeights);
  r.text(j, "split", split);
  bool known = false;
  for (Split s : {Split::Single, Split::Optimal, Split::Balanced, Split::Declared})
    if (split == name(s)) c.split = s, known = true;
  r.ok = r.ok && known;
  if (const auto* stages = r.array(j, "stages"))
    for (const auto& s : *stages) {
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer()) {
        r.ok = false;
        break;
      }
      c.stages.emplace_back(s[0].get<int>(), r.ints(s[1]));
    }
  if (const auto* l = r.array(j, "layers_per_ipu")) c.layersPerIpu = r.ints(*l);
  r.number(j, "ipus_used", c.ipusUsed);
  r.flag(j, "fits", c.fits);
  r.number(j, "step_time", c.stepTime);
  r.number(j, "samples_per_second", c.samplesPerSecond);
  r.number(j, "tokens_per_second", c.tokensPerSecond);
  r.number(j, "time_to_train", c.timeToTrain);
  r.number(j, "peak_memory_bytes", c.peakMemoryBytes);
  r.number(j, "capacity_bytes", c.capacityBytes);
  r.number(j, "peak_ipu", c.peakIpu);
  r.text(j, "peak_component", c.peakComponent);
  r.number(j, "peak_component_bytes", c.peakComponentBytes);
  r.number(j, "streaming_bytes", c.streamingBytes);
  r.number(j, "streaming_capacity_bytes", c.streamingCapacityBytes);
  r.number(j, "streaming_ipu", c.streamingIpu);
  r.flag(j, "in_processor_over", c.inProcessorOver);
  r.number(j, "throughput_low", c.throughputLow);
  r.number(j, "throughput_high", c.throughputHigh);
  if (const auto* regimes = r.array(j, "regimes"))
    for (const auto& x : *regimes) {
      cost::RegimeFlag f{cost::Regime::OtherModel, {}};
      r.named(x, "regime", f.regime);
      r.text(x, "message", f.message);
      c.regimes.push_back(std::move(f));
    }
  if (const auto* sensitivities = r.array(j, "sensitivities"))
    for (const auto& x : *sensitivities) {
      cost::Sensitivity sv;
      const auto range = x.is_object() ? x.find("range") : x.end();
      if (range == x.end()) r.ok = false;
      else sv.range = r.range(*range);
      r.number(x, "samples_per_second_at_low", sv.samplesPerSecondAtLow);
      r.number(x, "samples_per_second_at_high", sv.samplesPerSecondAtHigh);
      c.sensitivities.push_back(sv);
    }
  if (const auto* b = r.array(j, "breakdown")) {
    cost::Breakdown& out = c.breakdown;
    double* parts[] = {&out.compute, &out.recompute, &out.pipelineFillDrain, &out.stageImbalance, &out.exchange, &out.allReduce,
                       &out.rtsCollectives, &out.acrossInstances, &out.streaming, &out.optimizer, &out.hostIo, &out.overhead};
    if (b->size() != std::size(parts)) r.ok = false;
    for (std::size_t i = 0; r.ok && i < std::size(parts); ++i) {
      if (!(*b)[i].is_number()) r.ok = false;
      else *parts[i] = (*b)[i].get<double>();
    }
  }
  r.number(j, "error_high", c.errorHigh);
  r.number(j, "ranked_step", c.rankedStep);
  r.number(j, "score", c.score);
  if (!r.ok) return std::nullopt;
  return c;
}

// Every number of a result is finite (JSON has no infinity): one that is not
// is not kept.
bool finite(const nlohmann::ordered_json& j) {
  if (j.is_number_float()) return std::isfinite(j.get<double>());
  if (j.is_structured())
    for (const auto& x : j)
      if (!finite(x)) return false;
  return true;
}

}  // namespace

ir::Json resultJson(const PhaseResult& r) {
  ir::Json j = ir::Json::object();
  j["phase"] = r.phase;
  j["objective"] = name(r.objective);
  j["global_batch"] = r.globalBatch;
  j["pod_ipus"] = r.podIpus;
  j["max_ipus"] = r.maxIpus;
  auto list = [](const std::vector<Candidate>& cs) {
    ir::Json a = ir::Json::array();
    for (const auto& c : cs) a.push(candidateJson(c));
    return a;
  };
  j["top"] = list(r.top);
  j["pareto"] = list(r.pareto);
  j["pareto_limits"] = r.paretoLimits;
  j["declared"] = r.declared ? candidateJson(*r.declared) : ir::Json();
  j["least_memory"] = r.leastMemory ? candidateJson(*r.leastMemory) : ir::Json();
  j["relax"] = r.relax;
  j["rank"] = name(r.rank);
  ir::Json checks = ir::Json::array();
  for (const auto& a : r.assumptions)
    checks.push(ir::Json({{"range", rangeJson(a.range)},
                          {"best_at_low", a.bestAtLow ? candidateJson(*a.bestAtLow) : ir::Json()},
                          {"best_at_high", a.bestAtHigh ? candidateJson(*a.bestAtHigh) : ir::Json()},
                          {"holds_at_low", a.holdsAtLow},
                          {"holds_at_high", a.holdsAtHigh}}));
  j["assumptions"] = checks;
  j["counts"] = {{"space", r.counts.space},
                 {"evaluated", r.counts.evaluated},
                 {"pruned", r.counts.pruned},
                 {"pruned_memory", r.counts.prunedMemory},
                 {"rejected_memory", r.counts.rejectedMemory},
                 {"not_searched", r.counts.notSearched}};
  j["seconds"] = r.seconds;
  j["error"] = r.error;
  return j;
}

std::optional<PhaseResult> resultFromJson(const nlohmann::ordered_json& j) {
  Reader r;
  PhaseResult out;
  r.text(j, "phase", out.phase);
  std::string objective;
  r.text(j, "objective", objective);
  if (auto o = objectiveNamed(objective)) out.objective = *o;
  else r.ok = false;
  r.number(j, "global_batch", out.globalBatch);
  r.number(j, "pod_ipus", out.podIpus);
  r.number(j, "max_ipus", out.maxIpus);
  auto list = [&](const char* key, std::vector<Candidate>& into) {
    if (const auto* a = r.array(j, key))
      for (const auto& x : *a) {
        auto c = candidateFromJson(x);
        if (!c) r.ok = false;
        else into.push_back(std::move(*c));
      }
  };
  list("top", out.top);
  list("pareto", out.pareto);
  if (const auto* a = r.array(j, "pareto_limits")) out.paretoLimits = r.ints(*a);
  auto optional = [&](const nlohmann::ordered_json& in, const char* key, std::optional<Candidate>& into) {
    const auto it = in.is_object() ? in.find(key) : in.end();
    if (it == in.end()) r.ok = false;
    else if (!it->is_null()) {
      into = candidateFromJson(*it);
      if (!into) r.ok = false;
    }
  };
  optional(j, "declared", out.declared);
  optional(j, "least_memory", out.leastMemory);
  std::string rank;
  r.text(j, "rank", rank);
  if (auto k = rankNamed(rank)) out.rank = *k;
  else r.ok = false;
  if (const auto* checks = r.array(j, "assumptions"))
    for (const auto& x : *checks) {
      AssumptionCheck a;
      const auto range = x.is_object() ? x.find("range") : x.end();
      if (range == x.end()) r.ok = false;
      else a.range = r.range(*range);
      optional(x, "best_at_low", a.bestAtLow);
      optional(x, "best_at_high", a.bestAtHigh);
      r.flag(x, "holds_at_low", a.holdsAtLow);
      r.flag(x, "holds_at_high", a.holdsAtHigh);
      out.assumptions.push_back(std::move(a));
    }
  if (const auto* a = r.array(j, "relax"))
    for (const auto& x : *a) {
      if (!x.is_string()) r.ok = false;
      else out.relax.push_back(x.get<std::string>());
    }
  const auto counts = j.is_object() ? j.find("counts") : j.end();
  if (counts == j.end() || !counts->is_object()) {
    r.ok = false;
  } else {
    r.number(*counts, "space", out.counts.space);
    r.number(*counts, "evaluated", out.counts.evaluated);
    r.number(*counts, "pruned", out.counts.pruned);
    r.number(*counts, "pruned_memory", out.counts.prunedMemory);
    r.number(*counts, "rejected_memory", out.counts.rejectedMemory);
    r.number(*counts, "not_searched", out.counts.notSearched);
  }
  r.number(j, "seconds", out.seconds);
  r.text(j, "error", out.error);
  if (!r.ok) return std::nullopt;
  return out;
}

std::optional<std::string> cacheDirectoryFromEnvironment() {
  namespace fs = std::filesystem;
  if (const char* off = std::getenv("IPU_NO_CACHE"); off != nullptr && *off != '\0' && std::strcmp(off, "0") != 0)
    return std::nullopt;
  fs::path base;
  // The XDG base directory rules: a relative $XDG_CACHE_HOME is ignored.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x == '/') base = x;
  else if (const char* h = std::getenv("HOME"); h != nullptr && *h == '/') base = fs::path(h) / ".cache";
  else return std::nullopt;
  return (base / "ipu" / "search").string();
}

std::optional<std::string> resultKey(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                                     const Options& o) {
  if (phase.mapping == nullptr || phase.model == nullptr) return std::nullopt;
  if (phase.mapping->pipelineKind == check::MappingSpec::PipelineKind::Lua) return std::nullopt;
  const std::optional<std::string> build = buildIdentity();
  if (!build) return std::nullopt;
  KeyWriter k;
  k.put("format", kFormat);
  k.put("build", *build);
  k.put("objective", name(o.objective));
  k.put("rank", name(o.rank));
  k.put("max_ipus", o.maxIpus);
  k.put("headroom", o.headroom);
  k.put("top", o.top);
  k.put("prune", o.prune);
  for (ir::MappingField f : o.fixed.fields) {
    const ir::MappingFieldRow& row = ir::mappingField(f);
    k.json(row.name, ir::fieldJson(row, row.get(o.fixed.values)));
  }
  if (o.fixed.microBatch) k.put("fixed.micro_batch", *o.fixed.microBatch);
  if (o.fixed.split) k.put("fixed.split", name(*o.fixed.split));
  putPhase(k, phase);
  putMapping(k, *phase.mapping);
  putLayers(k, *phase.layers);
  // The layers as the search costs them for every micro batch it may try:
  // each divisor of the global batch.
  const long long global = phase.batch.globalBatch;
  std::vector<long long> divisors, large;
  for (long long d = 1; global > 0 && d <= global / d; ++d)
    if (global % d == 0) {
      divisors.push_back(d);
      if (d != global / d) large.push_back(global / d);
    }
  divisors.insert(divisors.end(), large.rbegin(), large.rend());
  LayerCosts costs(evaluator, phase);
  for (long long b : divisors) {
    k.put("at_micro_batch", b);
    const check::PhaseSpec* costed = costs.phaseFor(b);
    if (costed == nullptr) k.put("costed", false);
    else putLayers(k, *costed->layers);
  }
  return k.hex();
}

PhaseResult searchPhaseCached(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                              const Options& options, const std::optional<std::string>& directory, bool* cached) {
  if (cached != nullptr) *cached = false;
  std::optional<std::string> key;
  if (directory) key = resultKey(phase, evaluator, sources, options);
  if (!key) return searchPhase(phase, evaluator, sources, options);
  const std::string path = (std::filesystem::path(*directory) / (*key + ".json")).string();
  // A file that is not what this version writes, or not for this key, is a miss.
  files::ReadResult file = files::readRegularFile(path, 64u << 20);
  if (file.ok()) {
    const auto j = nlohmann::ordered_json::parse(file.text, nullptr, /*allow_exceptions=*/false);
    auto is = [&](const char* field, const std::string& want) {
      const auto it = j.find(field);
      return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == want;
    };
    const auto result = j.is_object() ? j.find("result") : j.end();
    if (j.is_object() && is("format", kFormat) && is("key", *key) && result != j.end())
      if (std::optional<PhaseResult> r = resultFromJson(*result)) {
        if (cached != nullptr) *cached = true;
        return *r;
      }
  }
  PhaseResult r = searchPhase(phase, evaluator, sources, options);
  // Only a search that covered its space is the function of its key that the
  // cache assumes: one stopped early (a deadline, Ctrl-C) is not kept. The
  // threads (Options::threads) change nothing of the result, and the
  // progress callback is not part of it.
  if (!r.error.empty() || r.stopped != StopReason::None) return r;
  ir::Json doc = ir::Json::object();
  doc["format"] = kFormat;
  doc["key"] = *key;
  doc["result"] = resultJson(r);
  if (!finite(doc)) return r;
  // A cache that cannot be written (no space, a read-only home) only costs time.
  std::error_code ec;
  std::filesystem::create_directories(*directory, ec);
  std::string error;
  // nlohmann's own dump: every number exactly (the ten digits of the
  // documents' contract, runtime/ir/json.h, would not give the same result back).
  if (!ec) files::writeFileSafely(path, static_cast<const nlohmann::ordered_json&>(doc).dump(1), error);
  return r;
}

}  // namespace ipu::search
