#include "runtime/ir/execution_plan.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::ir {

const char* name(DType t) { return t == DType::FP16 ? "fp16" : "fp32"; }

const char* name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
  }
  return "all_reduce";
}

const char* name(CollectiveTensors t) {
  switch (t) {
    case CollectiveTensors::Gradients: return "gradients";
    case CollectiveTensors::UpdatedWeights: return "updated_weights";
    case CollectiveTensors::StreamedWeights: return "streamed_weights";
    case CollectiveTensors::BatchNormStatistics: return "batch_norm_statistics";
    case CollectiveTensors::ShardActivations: return "shard_activations";
    case CollectiveTensors::ShardGradients: return "shard_gradients";
  }
  return "gradients";
}

void setOpName(Layer& l, const std::string& name) {
  const std::optional<LayerOp> op = layerOpFromName(name);
  l.op = op.value_or(LayerOp::Other);
  l.otherOp = op ? "" : name;
}

std::vector<int> batchNormChannels(const Layer& l) {
  if (l.op != LayerOp::ConvStem && l.op != LayerOp::Bottleneck && l.op != LayerOp::BasicBlock) return {};
  auto number = [&](const char* key) {
    for (const auto& a : l.attributes)
      if (a.name == key && a.text.empty() && a.number >= 1 && a.number <= 1e7 && a.number == static_cast<double>(static_cast<long long>(a.number)))
        return static_cast<int>(a.number);
    return 0;
  };
  for (const auto& a : l.attributes)
    if (a.name == "norm" && a.text != "batch") return {};
  if (l.op == LayerOp::ConvStem) {
    if (number("out") == 0) return {};
    return {number("out")};
  }
  const int in = number("inputs"), out = number("out"), stride = number("stride");
  const int mid = l.op == LayerOp::Bottleneck ? number("mid") : out;
  if (in == 0 || out == 0 || stride == 0 || mid == 0) return {};
  std::vector<int> units = l.op == LayerOp::Bottleneck ? std::vector<int>{mid, mid, out} : std::vector<int>{out, out};
  if (stride != 1 || in != out) units.push_back(out);
  return units;
}

double Traffic::stageExchangeBytes(long long microBatches) const {
  double perMicroBatch = 0;
  for (const auto& b : boundaries) perMicroBatch += b.activationBytes + b.gradientBytes;
  return static_cast<double>(microBatches) * perMicroBatch;
}

namespace {

Json source(const SourceRef& s) {
  Json j = Json::object();
  j["file"] = s.file;
  j["line"] = s.line;
  j["column"] = s.column;
  return j;
}

Json flops(const Flops& f) {
  Json j = Json::object();
  j["matmul"] = f.matmul;
  j["attention"] = f.attention;
  j["conv"] = f.conv;
  j["elementwise"] = f.elementwise;
  j["total"] = f.total();
  return j;
}

Json memory(const MemoryBreakdown& m) {
  Json j = Json::object();
  j["weights"] = m.weights;
  j["optimizer_state"] = m.optimizerState;
  j["gradient_accumulators"] = m.gradientAccumulators;
  j["activations"] = m.activations;
  j["code"] = m.code;
  j["exchange"] = m.exchange;
  j["temporaries"] = m.temporaries;
  j["other"] = m.other();
  j["total"] = m.total();
  return j;
}

Json chip(const hw::Chip& c) {
  Json j = Json::object();
  j["name"] = c.name;
  j["clock_hz"] = c.clockHz;
  j["tiles"] = c.tiles;
  j["memory_bytes"] = c.memoryBytes;
  j["peak_fp16_flops"] = c.peakFlops(true);
  j["peak_fp32_flops"] = c.peakFlops(false);
  // The rest of the chip the cost model reads: with them the document, and
  // so the plan's content hash, holds every figure the plan was made with.
  j["memory_bandwidth"] = c.memoryBandwidth;
  j["exchange_bandwidth"] = c.exchangeBandwidth;
  j["ipu_links"] = c.ipuLinks;
  j["ipu_link_bandwidth"] = c.ipuLinkBandwidth;
  j["code_base_bytes"] = c.codeBaseBytes;
  if (c.calibration.present) {
    const hw::Calibration& k = c.calibration;
    Json cal = Json::object();
    cal["source"] = k.source;
    cal["matmul_efficiency"] = k.matmulEfficiency;
    cal["conv_efficiency"] = k.convEfficiency;
    cal["attention_factor"] = k.attentionFactor;
    cal["op_latency_cycles"] = k.opLatencyCycles;
    cal["step_overhead_s"] = k.stepOverheadSeconds;
    cal["update_s_per_parameter"] = k.updateSecondsPerParameter;
    cal["gw_latency_s"] = k.gwLatencySeconds;
    Json sw = Json::object();
    for (const auto& [release, seconds] : k.softwareStepOverhead) sw[release] = seconds;
    cal["software_step_overhead_s"] = std::move(sw);
    Json rows = Json::array();
    for (const auto& r : k.rows) {
      Json row = Json::object();
      row["family"] = r.family;
      row["ipus"] = r.ipus;
      row["accumulation"] = r.accumulation;
      row["loo_error"] = r.looError;
      row["logo_error"] = r.logoError;
      rows.push(std::move(row));
    }
    cal["rows"] = std::move(rows);
    j["calibration"] = std::move(cal);
  } else {
    j["calibration"] = Json();
  }
  return j;
}

Json pod(const hw::Pod& p) {
  Json j = Json::object();
  j["name"] = p.name;
  j["ipus"] = p.ipus();
  j["machine"] = p.machine.name;
  j["machines"] = p.machines;
  j["chip"] = chip(p.machine.chip);
  j["streaming_memory_bytes_per_ipu"] = p.streamingBytesPerIpu();
  j["streaming_bandwidth_per_ipu"] = p.machine.streamingBandwidth;
  j["gw_link_bandwidth_per_machine"] = p.machine.gwLinkBandwidth;
  j["gw_link_latency_s"] = p.machine.gwLinkLatencySeconds;
  j["host_bandwidth_per_machine"] = p.machine.hostBandwidth;
  j["host_network_bandwidth_per_host"] = p.machine.hostNetworkBandwidth;
  j["host_network_latency_s"] = p.machine.hostNetworkLatencySeconds;
  j["host_cores"] = p.machine.hostCores;
  j["host_storage_bandwidth_per_machine"] = p.machine.hostStorageBandwidth;
  j["machines_per_rack"] = p.machinesPerRack;
  j["power_of_two_replicas"] = p.powerOfTwoReplicas;
  return j;
}

}  // namespace

Json toJson(const PhasePlan& ph) {
  Json j = Json::object();
  j["name"] = ph.name;
  j["from"] = ph.from.empty() ? Json() : Json(ph.from);
  j["source"] = source(ph.source);
  j["model"] = ph.model;
  j["software"] = ph.software.empty() ? Json() : Json(ph.software);
  j["device_iterations"] = ph.deviceIterations;
  j["pod"] = pod(ph.pod);
  j["micro_batch"] = ph.batch.microBatch;
  j["gradient_accumulation"] = ph.batch.gradientAccumulation;
  j["global_batch"] = ph.batch.globalBatch;
  j["replicas"] = ph.batch.replicas;
  j["derived"] = nameOf(ph.batch.derived);
  j["ipus_used"] = ph.ipusUsed;
  j["parameters"] = ph.parameters;
  j["seq_len"] = ph.seqLen ? Json(ph.seqLen) : Json();
  j["masked_tokens"] = ph.maskedTokens ? Json(ph.maskedTokens) : Json();
  j["image_size"] = ph.imageSize ? Json(ph.imageSize) : Json();
  // Written only when set, so that plans without it keep their hashes.
  if (ph.labelSmoothing > 0) j["label_smoothing"] = ph.labelSmoothing;
  j["steps"] = ph.steps;
  j["epochs"] = ph.epochs > 0 ? Json(ph.epochs) : Json();
  j["fits"] = ph.fits;

  Json m = Json::object();
  m["name"] = ph.mapping.name;
  // Every setting, from the one table of mapping fields (mapping_fields.h).
  writeMappingJson(ph.mapping, m);
  j["mapping"] = std::move(m);

  Json p = Json::object();
  p["name"] = ph.precision.name;
  p["compute"] = name(ph.precision.compute);
  p["weights"] = name(ph.precision.weights);
  p["master_weights"] = ph.precision.masterWeights ? "fp32" : "none";
  p["partials"] = name(ph.precision.partials);
  p["accumulators"] = name(ph.precision.accumulators);
  p["optimizer_state"] = name(ph.precision.optimizerState);
  p["stochastic_rounding"] = ph.precision.stochasticRounding;
  Json ls = Json::object();
  ls["kind"] = nameOf(ph.precision.lossScale.kind);
  ls["value"] = ph.precision.lossScale.value;
  if (!ph.precision.lossScale.luaFunction.empty()) ls["lua"] = ph.precision.lossScale.luaFunction;
  p["loss_scale"] = std::move(ls);
  j["precision"] = std::move(p);

  Json o = Json::object();
  o["name"] = ph.optimizer.name;
  o["kind"] = nameOf(ph.optimizer.kind);
  o["moments"] = ph.optimizer.moments;
  o["beta1"] = ph.optimizer.beta1;
  o["beta2"] = ph.optimizer.beta2;
  o["epsilon"] = ph.optimizer.epsilon;
  o["weight_decay"] = ph.optimizer.weightDecay;
  o["momentum"] = ph.optimizer.momentum;
  o["bias_correction"] = ph.optimizer.biasCorrection;
  Json ex = Json::array();
  for (ParamClass c : ph.optimizer.exclude) ex.push(nameOf(c));
  o["exclude"] = std::move(ex);
  j["optimizer"] = std::move(o);

  Json lr = Json::object();
  lr["base"] = ph.lr.base;
  lr["per"] = ph.lr.per > 0 ? Json(ph.lr.per) : Json();
  lr["peak"] = ph.lr.peak;
  lr["warmup_steps"] = ph.lr.warmupSteps;
  lr["decay"] = nameOf(ph.lr.decay);
  lr["end"] = ph.lr.end;
  lr["power"] = ph.lr.power;
  if (!ph.lr.luaFunction.empty()) lr["lua"] = ph.lr.luaFunction;
  j["lr"] = std::move(lr);

  Json ds = Json::object();
  ds["name"] = ph.dataset.name;
  ds["kind"] = nameOf(ph.dataset.kind);
  ds["samples"] = ph.dataset.samples > 0 ? Json(ph.dataset.samples) : Json();
  ds["packing"] = ph.dataset.packing;
  // What the estimate counts per sample (throughput in real sequences) and
  // what the emulator masks: a plan that differs in them is another plan.
  ds["sequences_per_pack"] = ph.dataset.sequencesPerPack;
  ds["mask_probability"] = ph.dataset.maskProbability;
  ds["host_work_s"] = ph.dataset.hostWorkSeconds > 0 ? Json(ph.dataset.hostWorkSeconds) : Json();
  ds["sample_bytes"] = ph.dataset.sampleBytes > 0 ? Json(ph.dataset.sampleBytes) : Json();
  j["dataset"] = std::move(ds);

  Json layers = Json::array();
  for (const auto& l : ph.layers) {
    Json lj = Json::object();
    lj["name"] = l.name;
    lj["op"] = opName(l);
    lj["definition"] = l.definition;
    lj["ipu"] = l.ipu;
    lj["stage"] = l.stage;
    lj["phase"] = l.phase;
    lj["params"] = l.params;
    if (!l.tiedTo.empty()) {
      lj["tied_to"] = l.tiedTo;
      lj["tied_params"] = l.tiedParams;
    }
    lj["forward_flops"] = flops(l.forward);
    lj["backward_flops"] = flops(l.backward);
    lj["activation_elements"] = l.activationElements;
    lj["input_elements"] = l.inputElements;
    lj["output_elements"] = l.outputElements;
    lj["workspace_elements"] = l.workspaceElements;
    lj["code_bytes"] = l.codeBytes;
    lj["ops"] = l.ops;
    lj["shardable"] = l.shardable;
    Json attrs = Json::object();
    for (const auto& a : l.attributes) attrs[a.name] = a.text.empty() ? Json(a.number) : Json(a.text);
    lj["attributes"] = std::move(attrs);
    lj["source"] = source(l.source);
    layers.push(std::move(lj));
  }
  j["layers"] = std::move(layers);

  Json stages = Json::array();
  for (const auto& s : ph.stages) {
    Json sj = Json::object();
    sj["index"] = s.index;
    sj["ipu"] = s.ipu;
    Json ls2 = Json::array();
    for (int li : s.layers) ls2.push(ph.layers[static_cast<std::size_t>(li)].name);
    sj["layers"] = std::move(ls2);
    sj["stash_depth"] = s.stashDepth;
    stages.push(std::move(sj));
  }
  j["stages"] = std::move(stages);
  j["pipeline_cycles"] = ph.schedule.cycles();
  Json sc = Json::object();
  sc["stages"] = ph.schedule.stages;
  sc["micro_batches"] = ph.schedule.microBatches;
  sc["recompute"] = name(ph.schedule.recompute);
  sc["cycles"] = ph.schedule.cycles();
  j["schedule"] = std::move(sc);

  Json ipus = Json::array();
  for (const auto& ipu : ph.ipus) {
    Json ij = Json::object();
    ij["index"] = ipu.index;
    ij["ipu"] = ipu.ipu;
    ij["shard"] = ipu.shard;
    Json names = Json::array();
    for (int li : ipu.layers) names.push(ph.layers[static_cast<std::size_t>(li)].name);
    ij["layers"] = std::move(names);
    ij["memory_bytes"] = memory(ipu.memory);
    ij["capacity_bytes"] = ipu.capacityBytes;
    ij["fits"] = ipu.fits;
    ij["streaming_bytes"] = ipu.streamingBytes;
    ij["streaming_capacity_bytes"] = ipu.streamingCapacityBytes;
    ij["phases"] = ipu.phases;
    ij["parameters"] = ipu.parameters;
    if (!ipu.phaseBytes.empty()) {
      Json pb = Json::array();
      for (double b : ipu.phaseBytes) pb.push(b);
      ij["phase_bytes"] = std::move(pb);
    }
    ipus.push(std::move(ij));
  }
  j["ipus"] = std::move(ipus);

  const Traffic& tr = ph.traffic;
  Json t = Json::object();
  Json bs = Json::array();
  for (const auto& b : tr.boundaries) {
    Json bj = Json::object();
    bj["from"] = b.from;
    bj["to"] = b.from + 1;
    bj["activation_bytes"] = b.activationBytes;
    bj["gradient_bytes"] = b.gradientBytes;
    bs.push(std::move(bj));
  }
  t["stage_boundaries"] = std::move(bs);
  t["stage_exchange_bytes"] = tr.stageExchangeBytes(ph.schedule.microBatches);
  Json cs = Json::array();
  for (const auto& c : tr.collectives) {
    Json cj = Json::object();
    cj["kind"] = name(c.kind);
    cj["tensors"] = name(c.tensors);
    cj["ipu"] = c.ipu;
    cj["bytes"] = c.bytes;
    if (c.tensors == CollectiveTensors::BatchNormStatistics || c.tensors == CollectiveTensors::ShardActivations ||
        c.tensors == CollectiveTensors::ShardGradients)
      cj["operations"] = c.operations;
    cs.push(std::move(cj));
  }
  t["collectives"] = std::move(cs);
  Json ss = Json::array();
  for (const auto& st : tr.streaming) {
    Json sj = Json::object();
    sj["ipu"] = st.ipu;
    sj["optimizer_state"] = st.optimizerState;
    sj["weights"] = st.weights;
    sj["gradients"] = st.gradients;
    sj["activations"] = st.activations;
    sj["update"] = st.update;
    sj["total"] = st.optimizerState + st.phased();
    ss.push(std::move(sj));
  }
  t["streaming"] = std::move(ss);
  j["traffic"] = std::move(t);
  return j;
}

Json toJson(const ExecutionPlan& plan) {
  Json j = Json::object();
  j["format"] = "ipu-plan/1";
  Json runs = Json::array();
  for (const auto& r : plan.runs) {
    Json rj = Json::object();
    rj["name"] = r.name;
    rj["source"] = source(r.source);
    rj["seed"] = r.seed;
    Json hooks = Json::array();
    for (const auto& h : r.hooks) hooks.push(h);
    rj["hooks"] = std::move(hooks);
    Json phases = Json::array();
    for (const auto& ph : r.phases) phases.push(toJson(ph));
    rj["phases"] = std::move(phases);
    runs.push(std::move(rj));
  }
  j["runs"] = std::move(runs);
  return j;
}

}  // namespace ipu::ir
