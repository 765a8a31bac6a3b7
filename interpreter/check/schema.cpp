#include "interpreter/check/schema.h"

#include "interpreter/check/program.h"
#include "runtime/ir/kinds.h"
#include "runtime/ir/mapping_fields.h"
#include "runtime/ir/schedule.h"

namespace ipu::check {

std::string Type::name() const {
  std::string base;
  switch (kind) {
    case TypeKind::Any: base = "any value"; break;
    case TypeKind::Number:
      base = dim.dimensionless() ? std::string(positive ? "a positive number" : "a number") : dim.describe();
      break;
    case TypeKind::Whole:
      base = dim.dimensionless() ? std::string(positive ? "a positive whole number" : "a whole number")
                                 : "a whole number of " + dim.describe();
      for (const auto& s : symbols) base += " or `" + s + "`";
      break;
    case TypeKind::Fraction: base = "a fraction between 0 and 1 (e.g. `0.25` or `25%`)"; break;
    case TypeKind::Bool: base = "`on` or `off`"; break;
    case TypeKind::String: base = "a string"; break;
    case TypeKind::Enum: {
      base = "one of ";
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i) base += i + 1 == symbols.size() ? " or " : ", ";
        base += "`" + symbols[i] + "`";
      }
      break;
    }
    case TypeKind::List: base = "a list of " + (element ? element->name() : std::string("values")); break;
    case TypeKind::Record: base = "a " + recordKind; break;
    case TypeKind::Struct: base = "a record `{ ... }`"; break;
    case TypeKind::Model: base = "a model"; break;
    case TypeKind::LayerRef: base = "a layer of the model"; break;
    case TypeKind::Schedule: base = "a learning rate or schedule"; break;
    case TypeKind::Pipeline: base = "a pipeline (`pipeline { ipu 0: ... }` or `balanced(p)`)"; break;
    case TypeKind::Lua: base = "Lua code (`lua \"\"\"...\"\"\"` or `lua file \"x.lua\"`)"; break;
    case TypeKind::LossScale: base = "a loss scale (a number, `none`, `dynamic`, `dynamic(...)` or `lua f`)"; break;
  }
  if (orList) base += ", or a list of them";
  return base;
}

const Field* Schema::find(const std::string& n) const {
  for (const auto& f : fields)
    if (f.name == n) return &f;
  return nullptr;
}

std::vector<std::string> Schema::names() const {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

namespace {

Type number(Dim d, bool positive = false) {
  Type t;
  t.kind = TypeKind::Number;
  t.dim = d;
  t.positive = positive;
  return t;
}
Type signedNumber() {
  Type t = number(Dim::none());
  t.mayBeNegative = true;
  return t;
}
Type whole(bool positive = true, Dim d = Dim::none(), double max = 0) {
  Type t;
  t.kind = TypeKind::Whole;
  t.positive = positive;
  t.dim = d;
  t.max = max;
  return t;
}
// Bounds far above any machine, small enough that products of them stay exact.
constexpr double kMaxCount = 1 << 20;     // IPUs, machines, replicas, shards, phases, tiles
constexpr double kMaxBatch = 1e12;        // samples, micro batches, steps
Type simple(TypeKind k) {
  Type t;
  t.kind = k;
  return t;
}
Type enumOf(std::vector<std::string> s, bool orList = false) {
  Type t;
  t.kind = TypeKind::Enum;
  t.symbols = std::move(s);
  t.orList = orList;
  return t;
}
// The symbols of a closed kind of the plan (runtime/ir/kinds.h), in its order.
template <class T>
struct Same {
  using type = T;
};
template <class E, std::size_t N>
Type kindOf(const E (&all)[N], const char* (*nameOf)(typename Same<E>::type)) {
  std::vector<std::string> names;
  for (E e : all) names.emplace_back(nameOf(e));
  return enumOf(std::move(names));
}
Type listOf(Type e) {
  Type t;
  t.kind = TypeKind::List;
  t.element = std::make_shared<Type>(std::move(e));
  return t;
}
Type record(std::string kind) {
  Type t;
  t.kind = TypeKind::Record;
  t.recordKind = std::move(kind);
  return t;
}
Type structOf(const Schema* s) {
  Type t;
  t.kind = TypeKind::Struct;
  t.schema = s;
  return t;
}

Field req(std::string name, Type t, std::string doc) {
  Field f;
  f.name = std::move(name);
  f.type = std::move(t);
  f.required = true;
  f.doc = std::move(doc);
  return f;
}
Field opt(std::string name, Type t, Value d, std::string doc, std::string defaultDoc = {}) {
  Field f;
  f.name = std::move(name);
  f.type = std::move(t);
  f.dflt = std::move(d);
  f.doc = std::move(doc);
  f.defaultDoc = std::move(defaultDoc);
  return f;
}

// A row of the table of mapping fields as a schema field.
Field fieldOf(const ir::MappingFieldRow& row, const Type& fractions, const Type& countOrAll) {
  Type t;
  Value dflt;
  switch (row.form) {
    case ir::FieldForm::Count:
      t = whole(true, Dim::none(), static_cast<double>(row.maxCount));
      dflt = Value::integral(row.defaultValue.count);
      break;
    case ir::FieldForm::CountOrAll:
      t = countOrAll;
      dflt = Value::integral(row.defaultValue.count);
      break;
    case ir::FieldForm::Choice:
      t = enumOf(row.symbols);
      dflt = Value::symbol(row.defaultValue.symbols.front());
      break;
    case ir::FieldForm::Choices: {
      std::vector<std::string> s = {"none"};
      s.insert(s.end(), row.symbols.begin(), row.symbols.end());
      t = enumOf(std::move(s), true);
      dflt = Value::symbol(ir::fieldText(row, row.defaultValue));
      break;
    }
    case ir::FieldForm::Fractions:
      t = fractions;
      dflt = Value::num(row.defaultValue.fractions.front());
      break;
  }
  return opt(row.name, std::move(t), std::move(dflt), row.doc);
}

const std::vector<std::string> kDtypes = {"fp16", "fp32"};

struct Schemas {
  Schema flopsPerCycle, calibration, chip, machine, pod, flops, layer, mapping, search, precision, lossScale, optimizer, dataset,
      training, phase, hook, sweep, metric;
  std::vector<const Schema*> all;

  Schemas() {
    flopsPerCycle.kind = "flops_per_cycle";
    flopsPerCycle.fields = {
        req("fp16", number(Dim::none(), true), "FLOP per cycle per tile at fp16 (multiply-accumulate counts as 2)"),
        req("fp32", number(Dim::none(), true), "FLOP per cycle per tile at fp32"),
    };

    calibration.kind = "calibration";
    calibration.fields = {
        opt("source", simple(TypeKind::String), Value::str("uncalibrated"), "what the parameters were fitted on"),
        req("matmul_efficiency", simple(TypeKind::Fraction), "share of peak FLOP/s a large matmul reaches"),
        req("conv_efficiency", simple(TypeKind::Fraction), "share of peak FLOP/s a large convolution reaches"),
        opt("attention_factor", simple(TypeKind::Fraction), Value::num(0.5),
            "attention products run at this fraction of the matmul efficiency (their inner dimension is the head size)"),
        req("op_latency", number(Dim::none()), "cycles of synchronisation and control per operation (each layer has `ops`)"),
        req("step_overhead", number(dims::seconds()), "fixed time per optimizer step (host synchronisation, program switches)"),
        opt("update_cost", number(dims::seconds()), Value::num(0, dims::seconds()),
            "time per optimizer step per parameter of one replica: the weight update, its collectives, norm reductions and stream copies"),
        opt("gw_latency", number(dims::seconds()), Value::num(0, dims::seconds()),
            "a measured latency of one step of a collective between racks, in place of the machine's `gw_link_latency`",
            "the machine's `gw_link_latency`"),
        opt("software", listOf(simple(TypeKind::String)), Value::ofList({}),
            "the software (a training's `software`) with a fixed cost per step of its own"),
        opt("software_step_overhead", listOf(number(dims::seconds())), Value::ofList({}),
            "per entry of `software`: its fixed time per optimizer step, in place of `step_overhead`"),
        opt("loo_family", listOf(simple(TypeKind::String)), Value::ofList({}),
            "per fitted row: the kinds of layers of its model (what `ipu calibrate` writes)"),
        opt("loo_ipus", listOf(number(Dim::none())), Value::ofList({}), "per fitted row: the IPUs it used"),
        opt("loo_accumulation", listOf(number(Dim::none())), Value::ofList({}), "per fitted row: its gradient accumulation"),
        opt("loo_micro_batch", listOf(number(Dim::none())), Value::ofList({}), "per fitted row: its micro batch"),
        opt("loo_memory", listOf(number(Dim::none())), Value::ofList({}),
            "per fitted row: its fullest IPU's In-Processor Memory over capacity, as planned"),
        opt("loo_phased", listOf(simple(TypeKind::Bool)), Value::ofList({}), "per fitted row: whether it ran phased"),
        opt("loo_recomputes", listOf(simple(TypeKind::Bool)), Value::ofList({}),
            "per fitted row: whether it recomputed activations"),
        opt("loo_software", listOf(simple(TypeKind::String)), Value::ofList({}),
            "per fitted row: the `software` it declared (framework and release), so an estimate says when its own is "
            "not among the rows of its kind of model"),
        opt("loo_chip", listOf(simple(TypeKind::String)), Value::ofList({}),
            "per fitted row: the chip it ran on (a record holds every row of its chip's architecture), so an estimate "
            "says when no row of its kind of model ran on its chip"),
        opt("loo_error", listOf(signedNumber()), Value::ofList({}),
            "per fitted row: its leave-one-out error (predicted / measured - 1, fitted without the row)"),
        opt("logo_error", listOf(signedNumber()), Value::ofList({}),
            "per fitted row: its leave-one-group-out error (predicted / measured - 1, fitted without the row's "
            "configuration group); `ipu estimate`'s intervals come from these"),
    };

    chip.kind = "chip";
    chip.fields = {
        req("clock", number(dims::hertz(), true), "clock frequency"),
        req("tiles", whole(true, Dim::none(), kMaxCount), "processor tiles (cores)"),
        req("memory", number(dims::bytes(), true), "In-Processor Memory (SRAM) per chip"),
        req("flops_per_cycle", structOf(&flopsPerCycle), "arithmetic throughput per tile per cycle, by precision"),
        opt("memory_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()), "aggregate SRAM bandwidth"),
        opt("exchange_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "on-chip tile-to-tile exchange bandwidth"),
        opt("ipu_links", whole(false, Dim::none(), kMaxCount), Value::integral(0), "IPU-Links per chip"),
        opt("ipu_link_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "bandwidth of one IPU-Link"),
        opt("code_base", number(dims::bytes()), Value::num(0, dims::bytes()),
            "always-live runtime, control and host-exchange code per chip (an estimate)"),
        opt("calibration", structOf(&calibration), Value(), "the cost model's fitted parameters for this chip",
            "none: `ipu estimate` refuses"),
    };

    machine.kind = "machine";
    machine.fields = {
        req("chip", record("chip"), "the IPU in this machine"),
        req("ipus", whole(true, Dim::none(), 1024), "IPUs per machine"),
        opt("streaming_memory", number(dims::bytes()), Value::num(0, dims::bytes()), "Streaming Memory (DDR) per machine"),
        opt("streaming_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "Streaming Memory bandwidth per IPU (not published by Graphcore: an assumption)"),
        opt("streaming_bandwidth_low", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "the lower end of the range the assumed `streaming_bandwidth` plausibly lies in: estimates that stream are re-priced at it",
            "none: the bandwidth is taken as exact"),
        opt("streaming_bandwidth_high", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "the upper end of that range", "none"),
        opt("gw_link_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "GW-Link bandwidth per machine, between racks"),
        opt("gw_link_latency", number(dims::seconds()), Value::num(0, dims::seconds()),
            "latency of one step of a collective between racks over GW-Links (not published by Graphcore: an assumption)"),
        opt("host_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()), "host link bandwidth per machine"),
        opt("host_network_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "network bandwidth of a host server to the other hosts, which a gradient reduction across host instances crosses "
            "(`ipu estimate --instances`; an assumption)"),
        opt("host_network_latency", number(dims::seconds()), Value::num(0, dims::seconds()),
            "latency of one step of a collective's ring between host servers (an assumption)"),
        opt("host_cores", whole(false, Dim::none(), kMaxCount), Value::integral(0),
            "CPU cores of the host that prepare this machine's input samples (read, decode, augment) for a dataset "
            "that states its `host_work` (an assumption: the hosts are not part of the IPU-POD)"),
        opt("host_storage_bandwidth", number(dims::bandwidth()), Value::num(0, dims::bandwidth()),
            "read bandwidth of the dataset's storage for this machine's samples, for a dataset that states its "
            "`sample_bytes` (an assumption)"),
    };

    pod.kind = "pod";
    pod.fields = {
        req("machine", record("machine"), "the machine the pod is built from"),
        req("machines", whole(true, Dim::none(), kMaxCount), "machines in the pod"),
        opt("machines_per_rack", whole(true, Dim::none(), kMaxCount), Value(),
            "machines joined by IPU-Links; racks are joined by GW-Links",
            "all of them (one rack)"),
        opt("power_of_two_replicas", simple(TypeKind::Bool), Value::boolean_(true),
            "replica counts must be powers of two (the ring rule of Graphcore's collectives)"),
    };

    flops.kind = "flops";
    flops.fields = {
        opt("matmul", number(Dim::none()), Value::num(0), "dense matrix multiplications"),
        opt("attention", number(Dim::none()), Value::num(0), "attention score and context products"),
        opt("conv", number(Dim::none()), Value::num(0), "convolutions"),
        opt("elementwise", number(Dim::none()), Value::num(0), "normalisation, activations, softmax, residuals"),
    };

    Type layerRef = simple(TypeKind::LayerRef);
    layer.kind = "layer";
    layer.fields = {
        req("op", simple(TypeKind::String), "the kernel that computes it (the emulator's op name)"),
        req("params", number(Dim::none()), "trainable parameters (excluding ones tied to another layer)"),
        opt("flops", structOf(&flops), Value(), "forward FLOPs for one micro batch, by kind of work", "zero"),
        opt("backward", structOf(&flops), Value(), "backward FLOPs for one micro batch", "twice `flops`"),
        opt("activations", number(Dim::none()), Value::num(0),
            "elements kept for the backward pass when not recomputed, per micro batch"),
        opt("input", number(Dim::none()), Value(), "elements of the layer's input per micro batch (its recomputation checkpoint)",
            "same as `output`"),
        req("output", number(Dim::none()), "elements of the layer's output per micro batch"),
        opt("workspace", number(Dim::none()), Value::num(0),
            "elements of matmul/convolution partials while it runs (temporary memory)"),
        opt("code", number(dims::bytes()), Value::num(0, dims::bytes()), "vertex state and exchange code for one instance"),
        opt("ops", number(Dim::none(), true), Value::num(1),
            "compute steps (supersteps) of one forward pass; each costs the chip's `op_latency`"),
        opt("shardable", simple(TypeKind::Bool), Value::boolean_(true), "can be split over `shard: t` IPUs"),
        opt("tied_to", layerRef, Value(), "a layer whose weights this one shares", "none"),
        opt("tied_params", number(Dim::none()), Value::num(0), "parameters shared with `tied_to`"),
    };

    Type amp;
    amp.kind = TypeKind::Fraction;
    amp.orList = true;
    Type wholeOrAll = whole(true, Dim::none(), kMaxCount);
    wholeOrAll.symbols = {"all"};
    search.kind = "search";
    search.fields = {
        opt("objective", kindOf(kSearchObjectives, nameOf), Value::symbol("throughput"),
            "what the chosen mapping is best at"),
        opt("max_ipus", whole(true, Dim::none(), kMaxCount), Value(), "use at most this many IPUs", "the pod's"),
        opt("headroom", simple(TypeKind::Fraction), Value::num(0), "share of every IPU's memory to keep free"),
    };

    mapping.kind = "mapping";
    mapping.fields = {
        req("model", simple(TypeKind::Model), "the model it maps (also written `mapping m for MODEL on POD`)"),
        req("pod", record("pod"), "the pod it runs on"),
        opt("pipeline", simple(TypeKind::Pipeline), Value(), ir::mappingField(ir::MappingField::Pipeline).doc,
            "everything on IPU 0"),
        // shard, replicas, ... from the table of mapping fields (below)
        opt("search", structOf(&search), Value(),
            "let `ipu` choose the mapping: the fastest that fits each phase using it (docs/search.md); "
            "the settings written beside it are kept fixed",
            "none"),
    };

    // The settings a user writes come from the one table of mapping fields
    // (runtime/ir/mapping_fields.h), in its order, before `search`.
    {
      std::vector<Field> settings;
      for (const auto& row : ir::mappingFields())
        if (row.written == ir::FieldWritten::ByUser) settings.push_back(fieldOf(row, amp, wholeOrAll));
      auto at = mapping.fields.end() - 1;  // `search`
      mapping.fields.insert(at, settings.begin(), settings.end());
    }

    lossScale.kind = "loss_scale";
    lossScale.fields = {
        opt("initial", number(Dim::none(), true), Value::num(32768), "starting scale"),
        opt("factor", number(Dim::none(), true), Value::num(2), "growth and back-off factor"),
        opt("interval", whole(true, Dim::none(), kMaxBatch), Value::integral(2000),
            "steps without overflow before the scale grows"),
    };

    Type dtype = enumOf(kDtypes);
    precision.kind = "precision";
    precision.fields = {
        opt("compute", dtype, Value::symbol("fp32"), "activations and gradients"),
        opt("weights", dtype, Value(), "stored weights", "same as `compute`"),
        opt("master_weights", enumOf({"none", "fp32"}), Value::symbol("none"), "an fp32 master copy of fp16 weights"),
        opt("partials", dtype, Value::symbol("fp32"), "matmul and convolution partial sums"),
        opt("accumulators", dtype, Value(), "gradient accumulation buffers", "same as `weights`"),
        opt("optimizer_state", dtype, Value::symbol("fp32"), "optimizer moments"),
        opt("stochastic_rounding", simple(TypeKind::Bool), Value::boolean_(false), "stochastic rounding of fp16 results"),
        opt("loss_scale", simple(TypeKind::LossScale), Value::symbol("none"),
            "static, dynamic, a Lua policy (`lua f`) or no loss scaling"),
    };

    optimizer.kind = "optimizer";
    optimizer.fields = {
        req("kind", kindOf(ir::kOptimizerKinds, ir::nameOf), "the algorithm"),
        opt("beta1", number(Dim::none()), Value::num(0.9), "first-moment decay (adam, adamw, lamb)"),
        opt("beta2", number(Dim::none()), Value::num(0.999), "second-moment decay (adam, adamw, lamb)"),
        opt("epsilon", number(Dim::none(), true), Value(), "denominator guard", "1e-8 for adam and adamw, 1e-6 otherwise"),
        opt("weight_decay", number(Dim::none()), Value::num(0), "decoupled weight decay (L2 for sgd)"),
        opt("momentum", number(Dim::none()), Value(), "momentum (momentum, lars)", "0.9 for momentum and lars, else 0"),
        opt("nesterov", simple(TypeKind::Bool), Value::boolean_(false), "Nesterov momentum"),
        opt("trust_coefficient", number(Dim::none(), true), Value::num(0.001), "LARS trust coefficient (eta)"),
        opt("clip_norm", number(Dim::none()), Value::num(0), "global gradient-norm clipping (0: off)"),
        opt("bias_correction", simple(TypeKind::Bool), Value::boolean_(true), "Adam-style bias correction"),
        opt("exclude", listOf(enumOf({"bias", "norm", "embedding"})), Value::ofList({}),
            "parameter classes without weight decay and trust-ratio scaling"),
    };

    dataset.kind = "dataset";
    dataset.fields = {
        opt("kind", kindOf(ir::kDatasetKinds, ir::nameOf), Value::symbol("synthetic"), "where samples come from"),
        opt("path", simple(TypeKind::String), Value(), "file or directory (text, files); relative to the script", "none"),
        opt("samples", whole(true, Dim::none(), kMaxBatch), Value(), "samples in one epoch (needed for `epochs`)", "unknown"),
        opt("packing", simple(TypeKind::Bool), Value::boolean_(false), "pack several sequences into one sample"),
        opt("sequences_per_pack", number(Dim::none(), true), Value(), "average sequences per packed sample",
            "2 when packing, else 1"),
        opt("mask_probability", simple(TypeKind::Fraction), Value::num(0.15), "share of tokens masked for MLM"),
        opt("host_work", number(dims::seconds(), true), Value(),
            "host CPU time, on one core, to read, decode and augment one sample: `ipu estimate` bounds the step by "
            "the machine's `host_cores` preparing its samples",
            "not priced"),
        opt("sample_bytes", number(dims::bytes(), true), Value(),
            "bytes of one sample in storage: `ipu estimate` bounds the step by the machine's `host_storage_bandwidth` "
            "reading its samples",
            "not priced"),
    };

    Type sched = simple(TypeKind::Schedule);
    std::vector<Field> phaseFields = {
        opt("model", simple(TypeKind::Model), Value(), "the model to train", "the mapping's model"),
        opt("mapping", record("mapping"), Value(), "how the model is mapped onto the pod", "none: required"),
        opt("precision", record("precision"), Value(), "numeric formats", "fp32 everywhere"),
        opt("optimizer", record("optimizer"), Value(), "the optimizer", "none: required"),
        opt("dataset", record("dataset"), Value(), "training data", "synthetic"),
        opt("seq_len", whole(true, Dim::none(), kMaxBatch), Value(), "sequence length (language models)", "unset"),
        opt("masked_tokens", whole(true, Dim::none(), kMaxBatch), Value(), "masked tokens per sequence (MLM)", "unset"),
        opt("image_size", whole(true, Dim::none(), kMaxBatch), Value(), "image side in pixels (vision models)", "unset"),
        opt("label_smoothing", simple(TypeKind::Fraction), Value::num(0),
            "classifier loss target: 1 - e on the label plus e / classes on every class (losses that classify samples)"),
        opt("micro_batch", whole(true, Dim::none(), kMaxBatch), Value(), "samples per replica per pipeline step", "derived"),
        opt("gradient_accumulation", whole(true, Dim::none(), kMaxBatch), Value(), "micro batches accumulated per optimizer step", "derived"),
        opt("global_batch", whole(true, Dim::none(), kMaxBatch), Value(), "samples per optimizer step: micro_batch x gradient_accumulation x replicas",
            "derived"),
        opt("steps", whole(true, dims::steps(), kMaxBatch), Value(), "optimizer steps", "from `epochs`"),
        opt("epochs", number(dims::epochs(), true), Value(), "passes over the dataset (needs the dataset's `samples`)",
            "none"),
        opt("lr", sched, Value(), "learning rate: `0.006 warmup 2000 steps then linear to 0`", "none: required"),
        opt("software", simple(TypeKind::String), Value::str(""),
            "the framework and Poplar SDK the run uses, e.g. \"popart sdk2.3\": the cost model's fixed cost per step is per software",
            "unstated"),
        opt("device_iterations", whole(true, Dim::none(), kMaxBatch), Value::integral(1),
            "optimizer steps the device runs per round trip to the host (PopTorch's deviceIterations, PopART's batchesPerStep, "
            "TensorFlow's iterations_per_loop or steps_per_execution): the framework's host-side cost is paid once per this many steps"),
    };
    phase.kind = "phase";
    phase.fields = phaseFields;

    training.kind = "training";
    training.fields = phaseFields;
    training.fields.push_back(opt("seed", whole(false, Dim::none(), kMaxExactInteger), Value::integral(0), "random seed of the run"));
    Type hooks = listOf(record("hook"));
    training.fields.push_back(opt("hooks", hooks, Value::ofList({}), "Lua hooks attached to the run"));

    hook.kind = "hook";
    hook.fields = {req("lua", simple(TypeKind::Lua), "the hook's Lua code")};

    // A sweep's members (docs/sweeps.md). Its parameters, metric, early
    // termination and start are not values but descriptions of the search
    // (paths, distributions, metric names): interpreter/check/sweeps.cpp reads
    // them; these rows give the members, their docs and "did you mean".
    Type described = simple(TypeKind::Any);
    metric.kind = "metric";
    metric.fields = {
        req("name", described, "the metric a trial reports: `loss`, `eval.mlm_accuracy`, `samples_per_s`, a hook's `ctx:log` key"),
        req("goal", enumOf({"minimize", "maximize"}), "whether lower or higher is better"),
        opt("target", signedNumber(), Value(), "stop the sweep once a trial reaches this value", "none"),
    };
    sweep.kind = "sweep";
    sweep.fields = {
        req("method", enumOf({"grid", "random", "bayes"}), "how trials are chosen: every cell, at random, or by Bayesian optimisation"),
        req("metric", described, "what is optimised: `minimize(loss)`, `maximize(eval.mlm_accuracy, target: 0.7)`, or a block"),
        req("parameters", described, "the values varied, by path from the training, each with its values or distribution"),
        opt("run_cap", whole(true, Dim::none(), 1e9), Value(), "trials in all (required for random and bayes)",
            "the grid's size"),
        opt("early_terminate", described, Value(), "stop poor trials early: `hyperband(min_iter: 100, eta: 3)`", "none"),
        opt("from", described, Value(), "what trials start from: `best(SWEEP)` or `checkpoint(\"RUN_ID\")`",
            "the training's initial weights"),
        opt("seed", whole(false, Dim::none(), kMaxExactInteger), Value::integral(0), "seed of the proposals (same seed, same trials)"),
    };

    all = {&chip, &machine, &pod, &layer, &flops, &mapping, &search, &precision, &lossScale, &optimizer, &dataset,
           &training, &phase, &hook, &flopsPerCycle, &calibration, &sweep, &metric};
  }
};

const Schemas& schemas() {
  static const Schemas s;
  return s;
}

}  // namespace

const Schema* schemaFor(const std::string& kind) {
  for (const Schema* s : schemas().all)
    if (s->kind == kind) return s;
  return nullptr;
}

const std::vector<const Schema*>& allSchemas() { return schemas().all; }

const std::vector<std::string>& contextVariables() {
  static const std::vector<std::string> v = {"micro_batch", "seq_len", "masked_tokens", "image_size"};
  return v;
}

}  // namespace ipu::check
