#include "interpreter/runner/step_export.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "interpreter/hooks/run_hooks.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/model.h"
#include "runtime/emulator/trainer.h"
#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::runner {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "ipu-export/1";

// ------------------------------------------------------------ .npy files
// NumPy's format, version 1.0 (numpy.lib.format): the magic string, a
// little-endian 16-bit header length, a Python dict literal giving dtype,
// order and shape, padded with spaces to a multiple of 64 bytes and ended by
// a newline, then the data in C order.

enum class DType { Float32, Int32 };

const char* descr(DType t) { return t == DType::Float32 ? "<f4" : "<i4"; }
const char* dtypeName(DType t) { return t == DType::Float32 ? "float32" : "int32"; }

struct Tensor {
  DType dtype = DType::Float32;
  std::vector<long long> shape;
  std::string data;   // little-endian elements, C order
};

bool littleEndianHost() {
  const std::uint32_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

std::string npyBytes(const Tensor& t) {
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? ",)" : i + 1 < t.shape.size() ? ", " : ")");
  if (t.shape.empty()) shape += ")";
  std::string header = std::string("{'descr': '") + descr(t.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t prefix = 10;   // magic (6), version (2), header length (2)
  std::size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out += t.data;
  return out;
}

Tensor floats(const emu::Mat& m) {
  Tensor t;
  t.dtype = DType::Float32;
  t.shape = {static_cast<long long>(m.rows()), static_cast<long long>(m.cols())};
  t.data.assign(reinterpret_cast<const char*>(m.data()), static_cast<std::size_t>(m.size()) * sizeof(float));
  return t;
}

Tensor ints(const std::vector<int>& v, std::vector<long long> shape) {
  static_assert(sizeof(int) == 4, "int32 data");
  Tensor t;
  t.dtype = DType::Int32;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int));
  return t;
}

// ------------------------------------------------------------ the global batch
// The micro batches of a step, micro batch i holding samples i * MB ... of the
// step (whatever replica runs it), put back together: sample b of micro batch
// i is sample i * MB + b of the global batch, and its row p is global row
// (i * MB + b) * seq + p. Labels become arrays over the rows with -1 where
// there is none, so the arrays do not depend on how the batch was cut.
struct GlobalBatch {
  std::vector<std::pair<std::string, Tensor>> arrays;
  Json counts = Json::object();
};

GlobalBatch globalBatch(const std::vector<emu::MicroBatch>& mbs, emu::Family family, bool nsp) {
  GlobalBatch out;
  long long samples = 0;
  for (const auto& mb : mbs) samples += mb.samples;
  if (family == emu::Family::Mlp || family == emu::Family::Image) {
    const long long features = mbs.empty() ? 0 : static_cast<long long>(mbs.front().features.cols());
    emu::Mat x(samples, features);
    std::vector<int> labels;
    long long at = 0;
    for (const auto& mb : mbs) {
      x.middleRows(at, mb.samples) = mb.features;
      std::vector<int> own(static_cast<std::size_t>(mb.samples), -1);
      for (std::size_t k = 0; k < mb.classifiedRow.size(); ++k) own[static_cast<std::size_t>(mb.classifiedRow[k])] = mb.classLabel[k];
      labels.insert(labels.end(), own.begin(), own.end());
      at += mb.samples;
    }
    out.arrays.emplace_back("features", floats(x));
    out.arrays.emplace_back("labels", ints(labels, {samples}));
    out.counts["class_count"] = mbs.empty() ? 0.0 : mbs.front().classCount;
    return out;
  }
  const long long seq = mbs.empty() ? 0 : mbs.front().seq;
  const std::vector<long long> shape{samples, seq};
  std::vector<int> tokens, segments, positions, ids, next;
  std::vector<int> mlm(static_cast<std::size_t>(samples * seq), -1), cls(static_cast<std::size_t>(samples * seq), -1);
  std::size_t base = 0;
  for (const auto& mb : mbs) {
    tokens.insert(tokens.end(), mb.tokens.begin(), mb.tokens.end());
    segments.insert(segments.end(), mb.segments.begin(), mb.segments.end());
    positions.insert(positions.end(), mb.positions.begin(), mb.positions.end());
    ids.insert(ids.end(), mb.sequenceIds.begin(), mb.sequenceIds.end());
    if (mb.nextToken.empty()) next.insert(next.end(), mb.tokens.size(), -1);
    else next.insert(next.end(), mb.nextToken.begin(), mb.nextToken.end());
    for (std::size_t k = 0; k < mb.maskedRow.size(); ++k) mlm[base + static_cast<std::size_t>(mb.maskedRow[k])] = mb.maskedLabel[k];
    for (std::size_t k = 0; k < mb.classifiedRow.size(); ++k) cls[base + static_cast<std::size_t>(mb.classifiedRow[k])] = mb.classLabel[k];
    base += mb.tokens.size();
  }
  out.arrays.emplace_back("tokens", ints(tokens, shape));
  if (family == emu::Family::Bert) out.arrays.emplace_back("segments", ints(segments, shape));
  out.arrays.emplace_back("positions", ints(positions, shape));
  out.arrays.emplace_back("sequence_ids", ints(ids, shape));
  if (family == emu::Family::Bert) {
    out.arrays.emplace_back("mlm_labels", ints(mlm, shape));
    out.counts["mlm_count"] = mbs.empty() ? 0.0 : mbs.front().mlmCount;
    if (nsp) {
      out.arrays.emplace_back("nsp_labels", ints(cls, shape));
      out.counts["nsp_count"] = mbs.empty() ? 0.0 : mbs.front().classCount;
    }
  } else {
    out.arrays.emplace_back("next_tokens", ints(next, shape));
    out.counts["lm_count"] = mbs.empty() ? 0.0 : mbs.front().lmCount;
  }
  return out;
}

// ------------------------------------------------------------ the directory

bool isStepDirectory(const std::string& name) {
  if (name.size() < 6 || name.rfind("step-", 0) != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What an export owns in its directory (and so may delete when replacing it).
bool ownedByExport(const std::string& name) {
  return name == "manifest.json" || name == "initial" || name == "vocabulary.txt" || isStepDirectory(name);
}

// Whether `manifest` is a previous export's (complete or not).
bool isExportManifest(const fs::path& manifest) {
  files::ReadResult read = files::readRegularFile(manifest.string(), std::uint64_t{1} << 28);
  if (!read.ok()) return false;
  Json j = Json::parse(read.text, nullptr, false);
  return j.is_object() && j.contains("format") && j["format"] == kFormat;
}

std::string stepName(long long step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%04lld", step);
  return buf;
}

class Writer {
 public:
  explicit Writer(fs::path root) : root_(std::move(root)) {}
  // Writes `relative` (atomically) and returns its entry for the manifest.
  bool write(const std::string& relative, const Tensor& t, Json& entry, std::string& error) {
    const fs::path path = root_ / relative;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) {
      error = "cannot create `" + path.parent_path().string() + "`: " + ec.message();
      return false;
    }
    if (!files::writeFileSafely(path.string(), npyBytes(t), error)) return false;
    entry = Json::object();
    entry["file"] = relative;
    entry["dtype"] = dtypeName(t.dtype);
    entry["shape"] = t.shape;
    return true;
  }
  bool writeText(const std::string& relative, const std::string& text, std::string& error) {
    return files::writeFileSafely((root_ / relative).string(), text, error);
  }

 private:
  fs::path root_;
};

// ------------------------------------------------------------ the settings

Json precisionJson(const ir::Precision& p) {
  Json j = Json::object();
  j["name"] = p.name;
  j["compute"] = ir::name(p.compute);
  j["weights"] = ir::name(p.weights);
  j["master_weights"] = p.masterWeights;
  j["partials"] = ir::name(p.partials);
  j["accumulators"] = ir::name(p.accumulators);
  j["optimizer_state"] = ir::name(p.optimizerState);
  j["stochastic_rounding"] = p.stochasticRounding;
  Json ls = Json::object();
  ls["kind"] = ir::nameOf(p.lossScale.kind);
  ls["value"] = p.lossScale.value;
  ls["factor"] = p.lossScale.factor;
  ls["interval"] = p.lossScale.interval;
  if (!p.lossScale.luaFunction.empty()) ls["lua"] = p.lossScale.luaFunction;  // the plan's name (docs/plan.md)
  j["loss_scale"] = std::move(ls);
  return j;
}

Json optimizerJson(const ir::Optimizer& o) {
  Json j = Json::object();
  j["name"] = o.name;
  j["kind"] = ir::nameOf(o.kind);
  j["beta1"] = o.beta1;
  j["beta2"] = o.beta2;
  j["epsilon"] = o.epsilon;
  j["weight_decay"] = o.weightDecay;
  j["momentum"] = o.momentum;
  j["trust_coefficient"] = o.trustCoefficient;
  j["clip_norm"] = o.clipNorm;
  j["bias_correction"] = o.biasCorrection;
  j["nesterov"] = o.nesterov;
  Json exclude = Json::array();
  for (ir::ParamClass c : o.exclude) exclude.push_back(ir::nameOf(c));
  j["exclude"] = std::move(exclude);
  j["moments"] = o.moments;
  return j;
}

Json lrJson(const ir::LrSchedule& lr) {
  Json j = Json::object();
  j["base"] = lr.base;
  j["per"] = lr.per;
  j["peak"] = lr.peak;
  j["warmup_steps"] = lr.warmupSteps;
  j["decay"] = ir::nameOf(lr.decay);
  j["end"] = lr.end;
  j["power"] = lr.power;
  if (!lr.luaFunction.empty()) j["lua"] = lr.luaFunction;  // the plan's name
  return j;
}

// The mapping's settings under the names of the plan (the table of mapping
// fields), then the batch and the resolved batch-norm group.
Json mappingJson(const ir::PhasePlan& ph) {
  const ir::Mapping& m = ph.mapping;
  ir::Json settings = ir::Json::object();
  settings["name"] = m.name;
  ir::writeMappingJson(m, settings);
  Json j = static_cast<const nlohmann::ordered_json&>(settings);
  j["micro_batch"] = ph.batch.microBatch;
  j["gradient_accumulation"] = ph.batch.gradientAccumulation;
  j["global_batch"] = ph.batch.globalBatch;
  j["batch_norm_group"] = m.batchNormGroup();  // the replicas sharing statistics (`all` resolved)
  return j;
}

// Names come from the script and paths from the file system: bytes that are
// not UTF-8 are replaced rather than refused.
std::string dumped(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"; }

const char* familyName(emu::Family f) {
  switch (f) {
    case emu::Family::Bert: return "bert";
    case emu::Family::Gpt: return "gpt";
    case emu::Family::Mlp: return "mlp";
    case emu::Family::Image: return "image";
  }
  return "?";
}

void report(session::Session& s, const emu::Error& e) { s.diagnostics().error(e.code, s.spanOf(e.where), e.message, e.help); }

// Where a phase's text comes from, as the run reads it (emulator.h, Options).
emu::Expected<std::string> corpusPath(const ir::PhasePlan& ph, const TrainSettings& settings) {
  const std::string builtin = settings.corpus.empty() ? emu::defaultCorpusPath() : settings.corpus;
  if (ph.dataset.kind == ir::DatasetKind::Synthetic || ph.dataset.path.empty()) return builtin;
  if (ph.dataset.kind != ir::DatasetKind::Text)
    return emu::Error{emu::code::kDataset, "dataset `" + ph.dataset.name + "` is of kind `" + ir::nameOf(ph.dataset.kind) + "`",
                      "the emulator reads `kind: text` datasets (a .txt file or a directory of them)", ph.source};
  fs::path p(ph.dataset.path);
  if (p.is_relative() && !settings.scriptDirectory.empty()) p = fs::path(settings.scriptDirectory) / p;
  return p.string();
}

}  // namespace

std::string exportDirectoryProblem(const std::string& directory) {
  if (directory.empty()) return "`--export-steps` needs a directory";
  std::error_code ec;
  const fs::path dir(directory);
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return "";
  if (!fs::is_directory(st)) return "`" + directory + "` exists and is not a directory; give --export-steps a new or empty directory";
  if (fs::is_empty(dir, ec) && !ec) return "";
  if (isExportManifest(dir / "manifest.json")) return "";
  return "`" + directory + "` is not empty and holds no earlier export (manifest.json); give --export-steps a new or empty directory";
}

std::string exportPlanProblem(const ir::ExecutionPlan& plan, long long steps, long long stepLimit) {
  if (plan.runs.size() != 1)
    return "`--export-steps` exports one training; this script runs " + std::to_string(plan.runs.size()) + " (run them from separate scripts)";
  const ir::RunPlan& run = plan.runs.front();
  if (run.phases.empty()) return "training `" + run.name + "` has no phase to export";
  const ir::PhasePlan& ph = run.phases.front();
  const long long available = stepLimit > 0 ? std::min(stepLimit, ph.steps) : ph.steps;
  if (steps > available)
    return "`--export-steps " + std::to_string(steps) + "`: the export covers the first phase, and phase `" + ph.name + "` runs " +
           std::to_string(available) + " step" + (available == 1 ? "" : "s") + (stepLimit > 0 && stepLimit < ph.steps ? " (--steps)" : "");
  return "";
}

ExportResult exportSteps(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings,
                         const ExportRequest& request, std::ostream& progress) {
  ExportResult result;
  const ir::PhasePlan& ph = run.phases.front();
  // Files that cannot be written (IPU5009); other problems are the run's own diagnostics.
  auto fail = [&](const std::string& message, const std::string& help = {}) {
    session.diagnostics().error(emu::code::kIo, session.spanOf(ph.source), message, help);
    return result;
  };
  if (!littleEndianHost()) return fail("the export writes little-endian files and this host is big-endian");
  if (!ph.fits) {
    session.diagnostics().error(emu::code::kPlanDoesNotFit, session.spanOf(ph.mapping.source),
                                "phase `" + ph.name + "` of mapping `" + ph.mapping.name + "` does not fit its IPUs (IPU2001 in `ipu plan`)",
                                "`ipu plan` lists the changes that make it fit");
    return result;
  }
  if (auto fits = emu::checkHostMemory(run, emu::hostMemoryAvailable()); !fits) {
    report(session, fits.error());
    return result;
  }
  auto model = emu::Model::build(ph);
  if (!model) {
    report(session, model.error());
    return result;
  }
  std::shared_ptr<const emu::TextCorpus> corpus;
  std::shared_ptr<const emu::ImageSet> images;
  if ((*model)->family() == emu::Family::Image && ph.dataset.kind == ir::DatasetKind::Files && !ph.dataset.path.empty()) {
    fs::path p(ph.dataset.path);
    if (p.is_relative() && !settings.scriptDirectory.empty()) p = fs::path(settings.scriptDirectory) / p;
    auto loaded = emu::loadImageFile(p.string(), ph.dataset.path);
    if (!loaded) {
      emu::Error e = loaded.error();
      e.where = ph.source;
      report(session, e);
      return result;
    }
    images = *loaded;
  } else if ((*model)->family() != emu::Family::Mlp && (*model)->family() != emu::Family::Image) {
    auto path = corpusPath(ph, settings);
    if (!path) {
      report(session, path.error());
      return result;
    }
    auto loaded = emu::loadCorpus(*path, (*model)->vocab());
    if (!loaded) {
      emu::Error e = loaded.error();
      if (e.where.file.empty()) e.where = ph.source;
      report(session, e);
      return result;
    }
    corpus = *loaded;
  }
  hooks::RunHooks runHooks(*session.hooks(), run, train::Source::Emulator);
  const train::Policies policies = runHooks.policies();
  emu::TrainerSettings ts;
  ts.seed = run.seed;
  ts.hostThreads = settings.threads > 0 ? settings.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ts.cancel = settings.cancel;
  ts.policies = &policies;
  ts.runName = run.name;
  ts.images = images;
  auto created = emu::PhaseTrainer::create(ph, ts, corpus);
  if (!created) {
    report(session, created.error());
    return result;
  }
  emu::PhaseTrainer& trainer = **created;
  const emu::Model& m = trainer.model();

  // The directory: created, or a previous export replaced. An unfinished
  // manifest goes first, so an export interrupted from here on is still
  // recognised as one (and refused by the reader).
  const fs::path root(request.directory);
  // Checked again: the directory may have changed since the command line was read.
  if (std::string problem = exportDirectoryProblem(request.directory); !problem.empty()) return fail(problem);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return fail("cannot create `" + request.directory + "`: " + ec.message(), "choose another directory for --export-steps");
  Writer out(root);
  Json manifest = Json::object();
  manifest["format"] = kFormat;
  manifest["complete"] = false;
  std::string error;
  if (!out.writeText("manifest.json", dumped(manifest), error)) return fail(error);
  std::vector<fs::path> earlier;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name != "manifest.json" && ownedByExport(name)) earlier.push_back(e.path());
  }
  for (const auto& p : earlier) {
    fs::remove_all(p, ec);
    if (ec) return fail("cannot remove `" + p.string() + "` of the earlier export: " + ec.message());
  }

  manifest["training"] = run.name;
  manifest["phase"] = ph.name;
  manifest["model"] = ph.model;
  manifest["family"] = familyName(m.family());
  // The layers as executed, in order, with their arguments: what a reference
  // needs to rebuild the model (docs/emulator.md, "What is executed").
  Json layers = Json::array();
  for (const auto& l : ph.layers) {
    Json lj = Json::object();
    lj["name"] = l.name;
    lj["op"] = ir::opName(l);
    Json attrs = Json::object();
    for (const auto& at : l.attributes) {
      // Counts (hidden, heads, vocab) are written as integers.
      if (!at.text.empty()) attrs[at.name] = at.text;
      else if (std::floor(at.number) == at.number && std::fabs(at.number) < 9e15) attrs[at.name] = static_cast<long long>(at.number);
      else attrs[at.name] = at.number;
    }
    lj["attributes"] = std::move(attrs);
    if (!l.tiedTo.empty()) lj["tied_to"] = l.tiedTo;
    layers.push_back(std::move(lj));
  }
  manifest["layers"] = std::move(layers);
  manifest["seed"] = run.seed;
  manifest["exported_steps"] = request.steps;
  manifest["phase_steps"] = ph.steps;   // the learning-rate schedule spans them
  manifest["mapping"] = mappingJson(ph);
  manifest["precision"] = precisionJson(ph.precision);
  manifest["optimizer"] = optimizerJson(ph.optimizer);
  manifest["lr_schedule"] = lrJson(ph.lr);
  Json data = Json::object();
  data["seq_len"] = ph.seqLen;
  data["masked_tokens"] = ph.maskedTokens;
  data["mask_probability"] = ph.dataset.maskProbability;
  data["packing"] = ph.dataset.packing;
  data["dataset"] = ph.dataset.name;
  if (corpus) {
    data["corpus"] = corpus->source;
    data["vocabulary_size"] = corpus->vocab.size();
    data["vocabulary"] = "vocabulary.txt";
    Json special = Json::object();
    special["pad"] = emu::Vocabulary::kPad;
    special["unk"] = emu::Vocabulary::kUnk;
    special["cls"] = emu::Vocabulary::kCls;
    special["sep"] = emu::Vocabulary::kSep;
    special["mask"] = emu::Vocabulary::kMask;
    data["special_tokens"] = std::move(special);
    // One token a line, as bytes: tokens never hold whitespace, and a byte
    // of a multi-byte character may be a token of its own (docs/emulator.md, "Data").
    std::string vocab;
    for (const auto& w : corpus->vocab.words) vocab += w + "\n";
    if (!out.writeText("vocabulary.txt", vocab, error)) return fail(error);
  } else {
    data["features"] = m.features();
    data["classes"] = m.classes();
    if (m.family() == emu::Family::Image) {
      data["channels"] = m.imageChannels();
      data["image_size"] = m.imageSize();
      data["label_smoothing"] = ph.labelSmoothing;
    }
  }
  manifest["data"] = std::move(data);
  Json params = Json::array();
  for (const auto& p : m.params()) {
    Json pj = Json::object();
    pj["name"] = p.name;
    pj["class"] = ir::nameOf(p.spec.cls);
    pj["shape"] = {static_cast<long long>(p.spec.rows), static_cast<long long>(p.spec.cols)};
    params.push_back(std::move(pj));
  }
  manifest["parameters"] = std::move(params);

  auto writeAll = [&](const std::string& dir, const emu::NamedTensors& tensors, Json& into) {
    into = Json::object();
    for (const auto& [name, t] : tensors) {
      Json entry;
      if (!out.write(dir + "/" + name + ".npy", floats(t), entry, error)) return false;
      into[name] = std::move(entry);
    }
    return true;
  };
  Json initial;
  if (!writeAll("initial", trainer.weights(), initial)) return fail(error);
  manifest["initial"] = std::move(initial);

  Json steps = Json::array();
  for (long long k = 1; k <= request.steps; ++k) {
    const std::string dir = stepName(k);
    Json sj = Json::object();
    sj["step"] = k;
    sj["first_sample"] = trainer.stepsDone() * ph.batch.globalBatch;   // of the phase's sample stream
    GlobalBatch batch = globalBatch(trainer.batches(trainer.stepsDone()), m.family(), m.hasNsp());
    auto r = trainer.step();
    if (!r) {
      report(session, r.error());
      return result;
    }
    if (!r->completed) {
      if (r->stopReason.empty()) {
        result.status = ExportResult::Status::Cancelled;
        progress << "export: cancelled after " << result.steps << " step" << (result.steps == 1 ? "" : "s") << "; `"
                 << request.directory << "` is incomplete\n";
        return result;
      }
      // A Lua policy failed: the hooks reported it.
      progress << "export: stopped at step " << k << ": " << r->stopReason << "; `" << request.directory << "` is incomplete\n";
      return result;
    }
    sj["lr"] = r->lr;
    sj["loss"] = r->loss;
    sj["loss_scale"] = r->lossScale;
    sj["skipped"] = r->skipped;
    sj["clip_factor"] = r->clipFactor;
    const emu::TensorFile state = trainer.checkpoint();
    sj["updates"] = std::stoll(state.get("updates", "0"));
    Json metrics = Json::object();
    for (const auto& [key, v] : r->metrics) metrics[key] = v;
    sj["metrics"] = std::move(metrics);
    Json bj = Json::object();
    for (const auto& [name, t] : batch.arrays) {
      Json entry;
      if (!out.write(dir + "/batch/" + name + ".npy", t, entry, error)) return fail(error);
      bj[name] = std::move(entry);
    }
    sj["batch_counts"] = batch.counts;
    sj["batch"] = std::move(bj);
    Json gj, wj;
    if (!writeAll(dir + "/gradients", trainer.gradients(), gj) || !writeAll(dir + "/weights", trainer.weights(), wj)) return fail(error);
    sj["gradients"] = std::move(gj);
    sj["weights"] = std::move(wj);
    // The optimizer's state after the step: moments, and the fp32 master
    // weights when fp16 weights keep one.
    Json oj = Json::object();
    for (const char* kind : {"m", "v", "master"}) {
      emu::NamedTensors of;
      const std::string prefix = std::string(kind) + "/";
      for (const auto& [name, t] : state.tensors)
        if (name.rfind(prefix, 0) == 0) of.emplace_back(name.substr(prefix.size()), t);
      if (of.empty()) continue;
      Json kj;
      if (!writeAll(dir + "/optimizer_state/" + kind, of, kj)) return fail(error);
      oj[kind] = std::move(kj);
    }
    sj["optimizer_state"] = std::move(oj);
    // Batch norm's running statistics after the step (buffers: no gradient,
    // no optimizer state); "running_mean/<layer>.<unit>" and "running_var/...".
    const emu::NamedTensors running = trainer.runningStatistics();
    if (!running.empty()) {
      Json rj;
      if (!writeAll(dir + "/running_statistics", running, rj)) return fail(error);
      sj["running_statistics"] = std::move(rj);
    }
    steps.push_back(std::move(sj));
    result.steps = k;
  }
  manifest["steps"] = std::move(steps);
  manifest["complete"] = true;
  if (!out.writeText("manifest.json", dumped(manifest), error)) return fail(error);
  result.status = ExportResult::Status::Written;
  progress << "exported " << request.steps << " step" << (request.steps == 1 ? "" : "s") << " of phase " << ph.name << " to "
           << request.directory << " (read it with tools/ipu_export.py)\n";
  return result;
}

}  // namespace ipu::runner
