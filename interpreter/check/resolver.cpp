#include "interpreter/check/resolver.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <filesystem>
#include <set>
#include <sstream>

#include "interpreter/check/batch.h"
#include "interpreter/check/codes.h"
#include "interpreter/check/mapping_rules.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::check {

namespace {

// State tensors an optimizer keeps per parameter (sgd with momentum: one).
int momentsOf(ir::OptimizerKind k) {
  switch (k) {
    case ir::OptimizerKind::Sgd: return 0;
    case ir::OptimizerKind::Momentum:
    case ir::OptimizerKind::Lars: return 1;
    case ir::OptimizerKind::Adam:
    case ir::OptimizerKind::AdamW:
    case ir::OptimizerKind::Lamb: return 2;
  }
  return 0;
}

// Phase fields fall back to the training's, then to the schema default.
const Value* phaseField(const Record& phase, const Record& training, const std::string& name) {
  if (const Value* v = phase.get(name); v != nullptr && !v->isUnknown()) return v;
  if (const Value* v = training.get(name); v != nullptr && !v->isUnknown()) return v;
  return nullptr;
}

Span phaseFieldSpan(const Record& phase, const Record& training, const std::string& name, Span dflt) {
  if (const RecordField* f = phase.field(name)) return f->nameSpan;
  if (const RecordField* f = training.field(name)) return f->nameSpan;
  return dflt;
}

double num(const Record& rec, const std::string& name, double dflt = 0) {
  const Value* v = rec.get(name);
  if (v != nullptr && v->isNumber()) return v->number;
  if (v == nullptr)
    if (const Schema* s = schemaFor(rec.kind))
      if (const Field* f = s->find(name); f != nullptr && f->dflt.isNumber()) return f->dflt.number;
  return dflt;
}

std::string sym(const Record& rec, const std::string& name, const std::string& dflt) {
  const Value* v = rec.get(name);
  if (v != nullptr && (v->kind == ValueKind::Symbol || v->kind == ValueKind::String)) return v->text;
  return dflt;
}

bool flag(const Record& rec, const std::string& name, bool dflt) {
  const Value* v = rec.get(name);
  if (v != nullptr && v->kind == ValueKind::Bool) return v->boolean;
  return dflt;
}

ir::DType dtype(const std::string& s) { return s == "fp16" ? ir::DType::FP16 : ir::DType::FP32; }

// A mapping field's value as the checker holds it, in the terms of its row.
ir::FieldValue fieldValue(const ir::MappingFieldRow& row, const Value& v) {
  ir::FieldValue out = row.defaultValue;
  auto each = [&](auto&& f) {
    if (v.kind == ValueKind::List)
      for (const auto& x : *v.list) f(x);
    else f(v);
  };
  switch (row.form) {
    case ir::FieldForm::Count:
      if (v.isNumber()) out.count = static_cast<long long>(v.number);
      break;
    case ir::FieldForm::CountOrAll:
      if (v.kind == ValueKind::Symbol && v.text == "all") out.count = ir::FieldValue::kAll;
      else if (v.isNumber()) out.count = static_cast<long long>(v.number);
      break;
    case ir::FieldForm::Choice:
      if (v.kind == ValueKind::Symbol || v.kind == ValueKind::String) out.symbols = {v.text};
      break;
    case ir::FieldForm::Choices: {
      out.symbols.clear();
      std::vector<std::string> chosen;
      each([&](const Value& x) { chosen.push_back(x.text); });
      for (const auto& s : row.symbols)  // in the row's order, each once
        if (std::find(chosen.begin(), chosen.end(), s) != chosen.end()) out.symbols.push_back(s);
      break;
    }
    case ir::FieldForm::Fractions:
      out.fractions.clear();
      each([&](const Value& x) { out.fractions.push_back(x.number); });
      break;
  }
  return out;
}

}  // namespace

hw::Pod Resolver::pod(const Record& rec) {
  hw::Pod p;
  p.name = rec.name;
  p.machines = static_cast<int>(num(rec, "machines"));
  p.powerOfTwoReplicas = flag(rec, "power_of_two_replicas", true);
  if (const Value* m = rec.get("machine"); m != nullptr && m->kind == ValueKind::Record) {
    const Record& mr = *m->record;
    p.machine.name = mr.name;
    p.machine.ipus = static_cast<int>(num(mr, "ipus"));
    p.machine.streamingMemoryBytes = num(mr, "streaming_memory");
    p.machine.streamingBandwidth = num(mr, "streaming_bandwidth");
    p.machine.streamingBandwidthLow = num(mr, "streaming_bandwidth_low");
    p.machine.streamingBandwidthHigh = num(mr, "streaming_bandwidth_high");
    p.machine.gwLinkBandwidth = num(mr, "gw_link_bandwidth");
    p.machine.gwLinkLatencySeconds = num(mr, "gw_link_latency");
    p.machine.hostBandwidth = num(mr, "host_bandwidth");
    p.machine.hostNetworkBandwidth = num(mr, "host_network_bandwidth");
    p.machine.hostNetworkLatencySeconds = num(mr, "host_network_latency");
    p.machine.hostCores = static_cast<int>(num(mr, "host_cores"));
    p.machine.hostStorageBandwidth = num(mr, "host_storage_bandwidth");
    if (const Value* c = mr.get("chip"); c != nullptr && c->kind == ValueKind::Record) {
      const Record& cr = *c->record;
      hw::Chip& chip = p.machine.chip;
      chip.name = cr.name;
      chip.clockHz = num(cr, "clock");
      chip.tiles = static_cast<int>(num(cr, "tiles"));
      chip.memoryBytes = num(cr, "memory");
      if (const Value* f = cr.get("flops_per_cycle"); f != nullptr && f->kind == ValueKind::Record) {
        chip.fp16FlopsPerCycle = num(*f->record, "fp16");
        chip.fp32FlopsPerCycle = num(*f->record, "fp32");
      }
      chip.memoryBandwidth = num(cr, "memory_bandwidth");
      chip.exchangeBandwidth = num(cr, "exchange_bandwidth");
      chip.ipuLinks = static_cast<int>(num(cr, "ipu_links"));
      chip.ipuLinkBandwidth = num(cr, "ipu_link_bandwidth");
      chip.codeBaseBytes = num(cr, "code_base");
      if (const Value* cal = cr.get("calibration"); cal != nullptr && cal->kind == ValueKind::Record) {
        const Record& k = *cal->record;
        chip.calibration.present = true;
        chip.calibration.source = sym(k, "source", "uncalibrated");
        chip.calibration.matmulEfficiency = num(k, "matmul_efficiency");
        chip.calibration.convEfficiency = num(k, "conv_efficiency");
        chip.calibration.attentionFactor = num(k, "attention_factor", 0.5);
        chip.calibration.opLatencyCycles = num(k, "op_latency");
        chip.calibration.stepOverheadSeconds = num(k, "step_overhead");
        chip.calibration.updateSecondsPerParameter = num(k, "update_cost");
        chip.calibration.gwLatencySeconds = num(k, "gw_latency");
        auto list = [&](const char* name) {
          const Value* v = k.get(name);
          return v != nullptr && v->kind == ValueKind::List ? v->list.get() : nullptr;
        };
        const auto* sw = list("software");
        const auto* swo = list("software_step_overhead");
        if (sw != nullptr && swo != nullptr)
          for (std::size_t i = 0; i < sw->size() && i < swo->size(); ++i)
            chip.calibration.softwareStepOverhead[(*sw)[i].text] = (*swo)[i].number;
        const auto* fam = list("loo_family");
        const auto* ipus = list("loo_ipus");
        const auto* acc = list("loo_accumulation");
        const auto* err = list("loo_error");
        const auto* groupErr = list("logo_error");   // absent from calibrations fitted before it: the row's own error then
        // The regime each row ran in; absent from calibrations fitted before it was recorded.
        const auto* micro = list("loo_micro_batch");
        const auto* memory = list("loo_memory");
        const auto* phased = list("loo_phased");
        const auto* recomputes = list("loo_recomputes");
        const auto* software = list("loo_software");   // absent from calibrations fitted before it was recorded
        const auto* rowChip = list("loo_chip");        // the same
        if (fam != nullptr && ipus != nullptr && acc != nullptr && err != nullptr)
          for (std::size_t i = 0; i < fam->size() && i < ipus->size() && i < acc->size() && i < err->size(); ++i) {
            hw::Calibration::Row row;
            row.family = (*fam)[i].text;
            row.ipus = (*ipus)[i].number;
            row.accumulation = (*acc)[i].number;
            row.looError = (*err)[i].number;
            row.logoError = groupErr != nullptr && i < groupErr->size() ? (*groupErr)[i].number : (*err)[i].number;
            if (micro != nullptr && memory != nullptr && phased != nullptr && recomputes != nullptr && i < micro->size() &&
                i < memory->size() && i < phased->size() && i < recomputes->size()) {
              row.described = true;
              row.microBatch = (*micro)[i].number;
              row.memory = (*memory)[i].number;
              row.phased = (*phased)[i].boolean;
              row.recomputes = (*recomputes)[i].boolean;
            }
            if (software != nullptr && i < software->size()) {
              row.softwareRecorded = true;
              row.software = (*software)[i].text;
            }
            if (rowChip != nullptr && i < rowChip->size()) row.chip = (*rowChip)[i].text;
            chip.calibration.rows.push_back(row);
          }
      }
    }
  }
  const Value* perRack = rec.get("machines_per_rack");
  p.machinesPerRack = perRack != nullptr && perRack->isNumber() ? static_cast<int>(perRack->number) : p.machines;
  if (p.machinesPerRack <= 0) p.machinesPerRack = p.machines;
  return p;
}

std::shared_ptr<const ModelSpec> Resolver::model(const Value& v) {
  if (v.kind != ValueKind::Model) return nullptr;
  if (auto it = models_.find(v.model.get()); it != models_.end()) return it->second;
  auto spec = std::make_shared<ModelSpec>();
  spec->name = v.model->name;
  spec->span = v.model->span;
  PhaseContext structural;
  spec->structure = expandModel(ev_, *v.model, structural);
  // Without a phase, the phase variables are unknown: a parameter count that
  // comes out unknown although nothing else went wrong depends on one.
  const std::size_t errorsBefore = ev_.diags().errorCount();
  LayerFactsMemo memo;
  for (const auto& leaf : spec->structure->leaves) {
    spec->layers.push_back(layerFacts(ev_, leaf, structural, &memo));
    spec->parameters += spec->layers.back().params;
  }
  if (ev_.diags().errorCount() == errorsBefore)
    for (std::size_t i = 0; i < spec->layers.size(); ++i) {
      if (!spec->layers[i].paramsUnknown) continue;
      const auto& leaf = spec->structure->leaves[i];
      ev_.error(code::kPhaseVariable, leaf.span,
                "the parameters of layer `" + leaf.path + "` depend on a phase variable",
                "a layer's `params` may use its arguments but not micro_batch, seq_len, masked_tokens or image_size");
    }
  for (const auto& f : spec->structure->fields)
    if (f.first == "family" && (f.second.kind == ValueKind::String || f.second.kind == ValueKind::Symbol))
      spec->family = f.second.text;
  // A tie must name a layer of this model.
  for (const auto& l : spec->layers)
    if (!l.tiedTo.empty() && spec->structure->leafIndex(l.tiedTo) < 0 && spec->structure->leavesUnder({PathPart{l.tiedTo, -1}}).empty())
      ev_.error(code::kUnknownLayer, l.span, "layer `" + l.path + "` is tied to `" + l.tiedTo + "`, which is not a layer of the model");
  models_[v.model.get()] = spec;
  return spec;
}

void Resolver::placeExplicit(const PipelineValue& p, MappingSpec& spec) {
  const ModelStructure& st = *spec.model->structure;
  if (p.stages.empty()) {  // reported when the block was built
    spec.placementErrors = true;
    return;
  }
  // Selectors name the model's layers: its top-level members are in scope.
  auto scope = std::make_shared<Scope>(p.scope);
  auto shared = spec.model->structure;
  std::set<std::string> top;
  for (const auto& leaf : st.leaves) top.insert(leaf.parts.front().name);
  for (const auto& name : top) {
    auto sel = std::make_shared<Selection>();
    sel->model = shared;
    sel->prefixes.push_back({PathPart{name, -1}});
    Value v;
    v.kind = ValueKind::Selection;
    v.selection = sel;
    scope->define(name, v, {});
  }
  auto everything = [&] {
    std::vector<int> all(st.leaves.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return st.describe(all);
  };
  std::vector<Span> placedAt(st.leaves.size());
  std::vector<int> placedOn(st.leaves.size(), -1);
  std::set<long long> ipus;
  const std::size_t errorsBefore = ev_.diags().errorCount();
  for (const auto& stage : p.stages) {
    StageSpec s;
    s.ipu = stage.ipu;
    s.span = stage.span;
    ipus.insert(stage.ipu);
    for (const syntax::Expr* e : stage.layers) {
      // The selector's root name must be a layer of the model (`encoders[0..3]`
      // is a misspelt layer, not an unknown variable).
      const syntax::Expr* root = e;
      while (true) {
        if (const auto* ix = root->dyn<syntax::IndexExpr>()) root = ix->object.get();
        else if (const auto* mx = root->dyn<syntax::MemberExpr>()) root = mx->object.get();
        else break;
      }
      if (const auto* n = root->dyn<syntax::NameExpr>(); n != nullptr && !top.count(n->name)) {
        std::vector<std::string> names(top.begin(), top.end());
        std::string help = base::didYouMean(n->name, names);
        if (help.empty()) help = "the layers of `" + spec.model->name + "` are: " + everything();
        ev_.error(code::kUnknownLayer, n->span, "`" + n->name + "` is not a layer of `" + spec.model->name + "`", help);
        continue;
      }
      Value v = ev_.eval(*e, scope);
      if (v.isUnknown()) continue;
      if (v.kind != ValueKind::Selection) {
        ev_.error(code::kTypeMismatch, e->span, "a pipeline stage lists layers of the model, found " + v.describe(),
                  "write layer names: `embedding, encoder[0..3]`");
        continue;
      }
      // Layers this selector places again, reported once for the selector.
      std::vector<int> again;
      Span firstAt;
      int firstOn = -1;
      for (const auto& prefix : v.selection->prefixes)
        for (int leaf : st.leavesUnder(prefix)) {
          auto li = static_cast<std::size_t>(leaf);
          if (placedOn[li] >= 0) {
            if (again.empty()) {
              firstAt = placedAt[li];
              firstOn = placedOn[li];
            }
            again.push_back(leaf);
            continue;
          }
          placedOn[li] = static_cast<int>(stage.ipu);
          placedAt[li] = e->span;
          s.leaves.push_back(leaf);
        }
      if (!again.empty()) {
        bool one = st.describe(again).find(',') == std::string::npos;
        auto& d = ev_.error(code::kLayerPlacedTwice, e->span,
                            "`" + st.describe(again) + "` " + (one ? "is" : "are") +
                                " placed twice",
                            "each layer runs on exactly one IPU; remove " + std::string(one ? "it" : "them") +
                                " from one of the stages");
        d.addNote({firstAt, "first placed here, on IPU " + std::to_string(firstOn)});
      }
    }
    spec.stages.push_back(std::move(s));
  }
  if (ev_.diags().errorCount() > errorsBefore) spec.placementErrors = true;
  std::vector<int> missing;
  for (std::size_t i = 0; i < st.leaves.size(); ++i)
    if (placedOn[i] < 0) missing.push_back(static_cast<int>(i));
  // After a selector error the unplaced layers are a consequence, not news.
  if (!missing.empty() && !spec.placementErrors) {
    bool one = st.describe(missing).find(',') == std::string::npos;
    // Suggest the stage that holds the layer just before the first missing one.
    long long suggest = ipus.empty() ? 0 : *ipus.rbegin();
    if (missing.front() > 0 && placedOn[static_cast<std::size_t>(missing.front() - 1)] >= 0)
      suggest = placedOn[static_cast<std::size_t>(missing.front() - 1)];
    ev_.error(code::kLayerNotPlaced, p.span,
              "`" + st.describe(missing) + "` " + (one ? "is" : "are") +
                  " not placed on any IPU",
              "add " + std::string(one ? "it" : "them") + " to a stage, e.g. `ipu " + std::to_string(suggest) +
                  ": ..., " + st.describe(missing) + "`");
    spec.placementErrors = true;
  }
  long long expect = 0;
  for (long long ipu : ipus) {
    if (ipu != expect) {
      Span at = p.span;
      for (const auto& stage : p.stages)
        if (stage.ipu == ipu) at = stage.indexSpan;
      ev_.error(code::kPipelineGap, at,
                "pipeline IPUs must be numbered 0.." + std::to_string(ipus.size() - 1) + " without gaps; IPU " +
                    std::to_string(expect) + " is missing",
                "renumber the stages so that the IPUs used are 0, 1, 2, ...");
      spec.placementErrors = true;
      break;
    }
    ++expect;
  }
  spec.pipelineIpus = std::max<int>(1, static_cast<int>(ipus.size()));
}

std::shared_ptr<const MappingSpec> Resolver::mapping(const Value& v) {
  if (v.kind != ValueKind::Record || v.record->kind != "mapping") return nullptr;
  if (auto it = mappings_.find(v.record.get()); it != mappings_.end()) return it->second;
  const Record& rec = *v.record;
  auto spec = std::make_shared<MappingSpec>();
  mappings_[v.record.get()] = spec;  // before resolving, so errors are reported once
  spec->name = rec.name;
  spec->span = rec.span;
  // Errors about a variant point at the variant, not at its base's fields.
  for (const auto& f : rec.fields)
    if (!f.inherited) spec->fieldSpans[f.name] = f.nameSpan;
  const Value* m = rec.get("model");
  const Value* podv = rec.get("pod");
  if (m == nullptr || m->isUnknown() || podv == nullptr || podv->isUnknown()) return nullptr;
  spec->model = model(*m);
  if (!spec->model) return nullptr;
  spec->pod = pod(*podv->record);
  // A pod built with errors has unknown sizes: checks against it would only restate them.
  bool hardwareErrors = podv->record->hadErrors;
  if (const Value* mv = podv->record->get("machine"); mv != nullptr && mv->kind == ValueKind::Record) {
    hardwareErrors |= mv->record->hadErrors;
    if (const Value* cv = mv->record->get("chip"); cv != nullptr && cv->kind == ValueKind::Record)
      hardwareErrors |= cv->record->hadErrors;
  }
  if (spec->pod.ipus() <= 0) hardwareErrors = true;
  ir::Mapping& mp = spec->mapping;
  mp.name = rec.name;
  // Every setting a user writes, through the one table of mapping fields
  // (runtime/ir/mapping_fields.h); a field not written keeps its default. The
  // schema has admitted only values of the field's form.
  for (const auto& row : ir::mappingFields()) {
    if (row.written != ir::FieldWritten::ByUser) continue;
    const Value* written = rec.get(row.name);
    ir::FieldValue value = row.defaultValue;
    if (written != nullptr && !written->isUnknown()) value = fieldValue(row, *written);
    row.set(mp, value);
  }

  if (const Value* sv = rec.get("search"); sv != nullptr && sv->kind == ValueKind::Record) {
    SearchSpec search;
    const std::string objective = sym(*sv->record, "objective", "throughput");
    for (SearchObjective o : kSearchObjectives)
      if (objective == nameOf(o)) search.objective = o;
    search.maxIpus = static_cast<int>(num(*sv->record, "max_ipus", 0));
    search.headroom = num(*sv->record, "headroom", 0);
    search.span = spec->spanOf("search");
    spec->search = search;
  }

  // Placement.
  const Value* pipe = rec.get("pipeline");
  if (pipe != nullptr) spec->pipelineSpan = pipe->span;
  if (pipe == nullptr || pipe->isUnknown()) {
    spec->pipelineKind = MappingSpec::PipelineKind::Single;
    spec->pipelineIpus = 1;
  } else if (pipe->kind == ValueKind::Lua) {
    spec->pipelineKind = MappingSpec::PipelineKind::Lua;
    spec->luaFunction = pipe->text;
    spec->pipelineIpus = 0;
  } else if (pipe->pipeline->kind == PipelineValue::Kind::Balanced) {
    spec->pipelineKind = MappingSpec::PipelineKind::Balanced;
    spec->pipelineIpus = static_cast<int>(pipe->pipeline->ipus);
  } else {
    spec->pipelineKind = MappingSpec::PipelineKind::Explicit;
    placeExplicit(*pipe->pipeline, *spec);
  }
  mp.pipelineIpus = spec->pipelineIpus;
  mp.pipelineKind = spec->pipelineKind;
  // A searched mapping's placement is the search's (docs/search.md): it keeps
  // the number of pipeline IPUs written beside `search`, not stages, and it
  // runs no hooks. Stages or a Lua placement written there would be replaced
  // without a word, so they are refused.
  if (spec->search && (spec->pipelineKind == MappingSpec::PipelineKind::Explicit ||
                       spec->pipelineKind == MappingSpec::PipelineKind::Lua)) {
    const bool lua = spec->pipelineKind == MappingSpec::PipelineKind::Lua;
    const std::string ipus = std::to_string(std::max(1, spec->pipelineIpus));
    ev_.error(code::kSearchWithPlacement, spec->fieldSpans.count("pipeline") ? spec->spanOf("pipeline") : spec->spanOf("search"),
              "mapping `" + rec.name + "` is chosen by `search`, which places the layers itself: " +
                  (lua ? "it does not run the Lua placement `" + spec->luaFunction + "`"
                       : "it would split them again, not keep these stages"),
              lua ? "drop `search` to place the layers with `lua " + spec->luaFunction +
                        "`, or write `pipeline: balanced(N)` to fix only the number of pipeline IPUs"
                  : "drop `search` to keep these stages (`ipu search` compares them with the rest), or write "
                    "`pipeline: balanced(" + ipus + ")` to fix only the number of pipeline IPUs");
  }

  // The rules every mapping keeps (mapping_rules.h), as variants and search candidates are checked.
  MappingRuleContext rules;
  rules.origin = MappingOrigin::Written;
  rules.hardwareKnown = !hardwareErrors;
  rules.fieldErrors = rec.hadErrors;
  if (!validateMapping(*spec, rules, ev_.diags()) && spec->pipelineKind == MappingSpec::PipelineKind::Balanced &&
      static_cast<std::size_t>(spec->pipelineIpus) > spec->model->layers.size()) {
    // balanced(p) deeper than the model: plan what it can hold, so later checks have a placement.
    spec->pipelineIpus = static_cast<int>(std::max<std::size_t>(1, spec->model->layers.size()));
    mp.pipelineIpus = spec->pipelineIpus;
    return spec;
  }
  batchNormReplicas(rec, *spec);
  return spec;
}

// The layers whose loss a phase's label_smoothing changes (the emulator's
// classifier heads; docs/emulator.md, "Label smoothing").
static bool classifiesSamples(const LayerFacts& l) {
  return l.op == "pooled_fc" || l.op == "token_classifier" || l.op == "softmax_loss" || l.op == "pooled_classifier";
}

// A conv layer of the standard library normalises with batch norm unless its
// `norm` is "group" (stdlib/layers.ipu).
static bool usesBatchNorm(const LayerFacts& l) {
  if (l.op != "conv_stem" && l.op != "bottleneck" && l.op != "basic_block") return false;
  for (const auto& a : l.attributes)
    if (a.name == "norm") return a.text != "group";
  return true;
}

void Resolver::batchNormReplicas(const Record& rec, MappingSpec& spec) {
  const Value* bn = rec.get(ir::nameOf(ir::MappingField::BatchNormReplicas));
  if (bn == nullptr || bn->isUnknown()) return;
  const ir::Mapping& mp = spec.mapping;  // read, and checked against the replicas, with the other settings
  const Span at = spec.spanOf(ir::nameOf(ir::MappingField::BatchNormReplicas));
  if (mp.batchNormReplicas > 1 && mp.replicas % mp.batchNormReplicas != 0) return;  // reported by validateMapping
  const bool spans = mp.batchNormReplicas == ir::Mapping::kAllReplicas || mp.batchNormReplicas > 1;
  if (!spans || spec.model == nullptr) return;
  bool any = false;
  for (const auto& l : spec.model->layers) any = any || usesBatchNorm(l);
  if (!any)
    ev_.warning(code::kBatchNormUnused, at,
                "`batch_norm_replicas` has no effect: model `" + spec.model->name + "` has no batch norm",
                "remove it (it applies to conv layers with `norm: \"batch\"`)");
}

Span MappingSpec::spanOf(const std::string& field) const {
  auto it = fieldSpans.find(field);
  return it != fieldSpans.end() ? it->second : span;
}

ir::Precision Resolver::precision(const Value* v) {
  ir::Precision p;
  if (v == nullptr || v->kind != ValueKind::Record) {
    p.name = "fp32 (default)";
    return p;
  }
  const Record& r = *v->record;
  p.name = r.name;
  p.compute = dtype(sym(r, "compute", "fp32"));
  p.weights = dtype(sym(r, "weights", ir::name(p.compute)));
  p.masterWeights = sym(r, "master_weights", "none") == "fp32" && p.weights == ir::DType::FP16;
  p.partials = dtype(sym(r, "partials", "fp32"));
  p.accumulators = dtype(sym(r, "accumulators", ir::name(p.weights)));
  p.optimizerState = dtype(sym(r, "optimizer_state", "fp32"));
  p.stochasticRounding = flag(r, "stochastic_rounding", false);
  if (const Value* ls = r.get("loss_scale")) {
    if (ls->isNumber()) {
      p.lossScale.kind = ls->number == 1 ? ir::LossScaleKind::None : ir::LossScaleKind::Static;
      p.lossScale.value = ls->number;
    } else if (ls->kind == ValueKind::Symbol && ls->text == "dynamic") {
      p.lossScale.kind = ir::LossScaleKind::Dynamic;
      p.lossScale.value = 32768;
    } else if (ls->kind == ValueKind::Lua) {
      p.lossScale.kind = ir::LossScaleKind::Lua;
      p.lossScale.luaFunction = ls->text;
    } else if (ls->kind == ValueKind::Record) {
      p.lossScale.kind = ir::LossScaleKind::Dynamic;
      p.lossScale.value = num(*ls->record, "initial", 32768);
      p.lossScale.factor = num(*ls->record, "factor", 2);
      p.lossScale.interval = num(*ls->record, "interval", 2000);
    }
  }
  return p;
}

ir::Optimizer Resolver::optimizer(const Value* v) {
  ir::Optimizer o;
  if (v == nullptr || v->kind != ValueKind::Record) return o;
  const Record& r = *v->record;
  o.name = r.name;
  // The schema admits only the kinds' names (a wrong one is reported there).
  o.kind = ir::optimizerKindFromName(sym(r, "kind", "sgd")).value_or(ir::OptimizerKind::Sgd);
  o.moments = momentsOf(o.kind);
  o.beta1 = num(r, "beta1", 0.9);
  o.beta2 = num(r, "beta2", 0.999);
  const bool adam = o.kind == ir::OptimizerKind::Adam || o.kind == ir::OptimizerKind::AdamW;
  const bool heavyBall = o.kind == ir::OptimizerKind::Momentum || o.kind == ir::OptimizerKind::Lars;
  o.epsilon = r.get("epsilon") ? num(r, "epsilon") : adam ? 1e-8 : 1e-6;
  o.weightDecay = num(r, "weight_decay", 0);
  o.momentum = r.get("momentum") ? num(r, "momentum") : heavyBall ? 0.9 : 0;
  if (o.kind == ir::OptimizerKind::Sgd && o.momentum > 0) o.moments = 1;
  o.nesterov = flag(r, "nesterov", false);
  o.trustCoefficient = num(r, "trust_coefficient", 0.001);
  o.clipNorm = num(r, "clip_norm", 0);
  o.biasCorrection = flag(r, "bias_correction", true);
  if (const Value* ex = r.get("exclude"); ex != nullptr && ex->kind == ValueKind::List)
    for (const auto& x : *ex->list)
      if (std::optional<ir::ParamClass> c = ir::paramClassFromName(x.text)) o.exclude.push_back(*c);
  return o;
}

ir::Dataset Resolver::dataset(const Value* v) {
  ir::Dataset d;
  if (v == nullptr || v->kind != ValueKind::Record) {
    d.name = "synthetic";
    return d;
  }
  const Record& r = *v->record;
  d.name = r.name;
  d.kind = ir::datasetKindFromName(sym(r, "kind", "synthetic")).value_or(ir::DatasetKind::Synthetic);
  if (const Value* p = r.get("path"); p != nullptr && p->kind == ValueKind::String) d.path = p->text;
  d.samples = num(r, "samples", 0);
  d.packing = flag(r, "packing", false);
  d.sequencesPerPack = r.get("sequences_per_pack") ? num(r, "sequences_per_pack") : d.packing ? 2 : 1;
  d.maskProbability = num(r, "mask_probability", 0.15);
  d.hostWorkSeconds = num(r, "host_work", 0);
  d.sampleBytes = num(r, "sample_bytes", 0);
  if (d.kind != ir::DatasetKind::Synthetic && d.path.empty())
    ev_.error(code::kMissingField, r.span, "dataset `" + r.name + "` of kind `" + ir::nameOf(d.kind) + "` needs a `path`",
              "add `path: \"data/corpus.txt\"` (relative to the script)");
  return d;
}

bool Resolver::batch(const Record& ph, const Record& tr, const MappingSpec& mapping, ir::Batch& out, Span at) {
  const Value* mb = phaseField(ph, tr, "micro_batch");
  const Value* ga = phaseField(ph, tr, "gradient_accumulation");
  const Value* gb = phaseField(ph, tr, "global_batch");
  long long r = mapping.mapping.replicas;
  out.replicas = r;
  auto ll = [](const Value* v) { return static_cast<long long>(v->number); };
  // Each figure is bounded by its schema; their product must be too.
  double samples = (mb ? mb->number : 1) * (ga ? ga->number : 1) * static_cast<double>(r);
  if (samples > 1e15 || (gb != nullptr && gb->number > 1e15)) {
    ev_.error(code::kOutOfRange, phaseFieldSpan(ph, tr, mb ? "micro_batch" : "gradient_accumulation", at),
              "the batch of phase `" + ph.name + "` is beyond 10^15 samples per step", "check the figures for a typo");
    return false;
  }
  BatchRequest request;
  if (mb != nullptr) request.microBatch = ll(mb);
  if (ga != nullptr) request.gradientAccumulation = ll(ga);
  if (gb != nullptr) request.globalBatch = ll(gb);
  BatchProblem problem = deriveBatch(request, r, ph.name, out);
  if (problem.code == nullptr) return true;
  ev_.error(problem.code, problem.field.empty() ? at : phaseFieldSpan(ph, tr, problem.field.c_str(), at), problem.message,
            problem.help);
  return false;
}

bool Resolver::schedule(const Value& v, const PhaseSpec& ph, ir::LrSchedule& out) {
  double sequences = static_cast<double>(ph.batch.globalBatch) * ph.dataset.sequencesPerPack;
  if (v.kind == ValueKind::Lua) {
    out.luaFunction = v.text;
    return true;
  }
  if (v.isNumber()) {
    out.base = out.peak = out.end = v.number;
    return true;
  }
  if (v.kind != ValueKind::Schedule) return false;
  const ScheduleValue& s = *v.schedule;
  if (s.base.isUnknown()) return false;
  if (!s.base.isNumber() || !s.base.dim.dimensionless() || !(s.base.number > 0)) {
    ev_.error(code::kBadSchedule, s.base.span, "a learning rate must be a positive number, found " + s.base.describe());
    return false;
  }
  out.base = out.peak = s.base.number;
  if (s.hasPer && !s.per.isUnknown()) {
    if (!s.per.isNumber() || !(s.per.number > 0) || !(s.per.dim.dimensionless() || s.per.dim == dims::samples())) {
      ev_.error(code::kBadSchedule, s.per.span, "`per` takes the reference batch size of the linear scaling rule, found " +
                                                    s.per.describe(),
                "write `lr: 0.1 per 256` for lr = 0.1 x global_batch / 256");
      return false;
    }
    out.per = s.per.number;
    out.peak = out.base * static_cast<double>(ph.batch.globalBatch) / out.per;
  }
  if (s.hasWarmup && !s.warmup.isUnknown()) {
    const Value& w = s.warmup;
    if (!w.isNumber()) {
      ev_.error(code::kBadSchedule, w.span, "warmup needs a length, found " + w.describe());
      return false;
    }
    if (w.dim == dims::steps()) out.warmupSteps = w.number;
    else if (w.dim == dims::epochs()) {
      if (ph.dataset.samples <= 0) {
        ev_.error(code::kEpochsNeedSamples, w.span, "warmup in epochs needs the dataset's size",
                  "set `samples` on the dataset, or give warmup in steps");
        return false;
      }
      out.warmupSteps = std::ceil(w.number * ph.dataset.samples / sequences);
    } else if (w.dim.dimensionless() && w.percent) {
      out.warmupSteps = std::round(w.number * static_cast<double>(ph.steps));
    } else {
      ev_.error(code::kBadSchedule, w.span, "warmup needs a unit, found " + w.describe(),
                "write `2000 steps`, `5 epochs` or `10%` (of the phase)");
      return false;
    }
    if (out.warmupSteps > static_cast<double>(ph.steps)) {
      ev_.error(code::kBadSchedule, w.span,
                "warmup of " + formatNumber(out.warmupSteps) + " steps is longer than phase `" + ph.name + "` (" +
                    std::to_string(ph.steps) + " steps)",
                "shorten the warmup or lengthen the phase");
      return false;
    }
  }
  out.decay = s.decay;
  if (s.hasEnd && !s.end.isUnknown()) {
    if (!s.end.isNumber() || !s.end.dim.dimensionless() || s.end.number < 0) {
      ev_.error(code::kBadSchedule, s.end.span, "a decay ends at a non-negative learning rate, found " + s.end.describe());
      return false;
    }
    out.end = s.end.number;
  } else if (s.decay == ir::LrDecay::Constant) {
    out.end = out.peak;
  }
  // poly(p) decays as (1 - progress)^p; the others take no argument
  // (exponential decays geometrically from the peak to `end`).
  if (s.decay == ir::LrDecay::Poly && s.decayArgs.empty()) {
    ev_.error(code::kBadSchedule, s.decaySpan, "`poly` needs its power: `then poly(2) to 0`",
              "poly(p) decays as (1 - progress)^p; poly(1) is linear");
    return false;
  }
  for (const auto& [name, a] : s.decayArgs) {
    if (s.decay != ir::LrDecay::Poly) {
      ev_.error(code::kBadSchedule, s.decaySpan, std::string("decay `") + ir::nameOf(s.decay) + "` takes no arguments",
                s.decay == ir::LrDecay::Exponential ? "exponential decay goes geometrically from the peak to its `to` value"
                                         : "only `poly(power)` takes one");
      return false;
    }
    if (s.decayArgs.size() > 1 || (!name.empty() && name != "power")) {
      ev_.error(code::kBadSchedule, s.decaySpan, "`poly` takes one argument, its power: `poly(2)`");
      return false;
    }
    if (!a.isNumber() || !a.dim.dimensionless() || !(a.number > 0)) {
      ev_.error(code::kBadSchedule, a.span, "the power of `poly` must be a positive number, found " + a.describe());
      return false;
    }
    out.power = a.number;
  }
  if (s.decay == ir::LrDecay::Exponential && !(out.end > 0)) {
    ev_.error(code::kBadSchedule, s.decaySpan, "exponential decay needs a positive end: `then exponential to 0.0001`");
    return false;
  }
  if (s.decay != ir::LrDecay::Constant && out.end > out.peak)
    ev_.warning(code::kBadSchedule, s.end.span,
                "the learning rate decays upward, from " + formatNumber(out.peak) + " to " + formatNumber(out.end),
                "a decay ends below its peak; for a constant rate write `then constant`");
  return true;
}

bool Resolver::phase(const Record& tr, const PhaseEntry& entry, const std::vector<PhaseSpec>& earlier, PhaseSpec& out) {
  const Record& ph = *entry.fields;
  out.name = entry.name;
  out.span = entry.span;
  out.from = entry.from;
  out.fromSpan = entry.fromSpan;
  bool ok = true;
  if (!entry.from.empty()) {
    bool found = std::any_of(earlier.begin(), earlier.end(), [&](const PhaseSpec& p) { return p.name == entry.from; });
    // Where the phase it starts from is written: before this one (then it is
    // missing from `earlier` only because it had errors, already reported),
    // after it, or nowhere.
    bool before = false, later = false, seenSelf = false;
    for (const auto& p : tr.phases) {
      if (&p == &entry || p.name == entry.name) seenSelf = true;
      else if (p.name == entry.from) (seenSelf ? later : before) = true;
    }
    if (!found && before) {
      ok = false;
    } else if (entry.from == entry.name) {
      ev_.error(code::kPhaseOrder, entry.fromSpan, "phase `" + entry.name + "` cannot start from itself",
                "name an earlier phase, or drop `from` to start from the initial weights");
      ok = false;
    } else if (!found && later) {
      ev_.error(code::kPhaseOrder, entry.fromSpan,
                "phase `" + entry.name + "` starts from `" + entry.from + "`, which comes after it",
                "phases run in order; move `" + entry.from + "` first");
      ok = false;
    } else if (!found) {
      std::vector<std::string> names;
      for (const auto& p : tr.phases) names.push_back(p.name);
      ev_.error(code::kUnknownPhase, entry.fromSpan, "no phase `" + entry.from + "` in training `" + tr.name + "`",
                base::didYouMean(entry.from, names));
      ok = false;
    }
  }
  const Value* mapv = phaseField(ph, tr, "mapping");
  if (mapv == nullptr) {
    ev_.error(code::kMissingSetting, entry.nameSpan, "phase `" + entry.name + "` has no `mapping`",
              "add `mapping: NAME` to the training (or to the phase)");
    return false;
  }
  out.mapping = mapping(*mapv);
  if (!out.mapping || !out.mapping->model) return false;
  out.model = out.mapping->model;
  if (const Value* mv = phaseField(ph, tr, "model"); mv != nullptr && mv->kind == ValueKind::Model) {
    auto m = model(*mv);
    if (m && m != out.mapping->model) {
      auto& d = ev_.error(code::kModelMismatch, phaseFieldSpan(ph, tr, "model", entry.nameSpan),
                          "phase `" + entry.name + "` trains `" + m->name + "`, but mapping `" + out.mapping->name +
                              "` maps `" + out.mapping->model->name + "`",
                          "use a mapping for `" + m->name + "`, or drop `model:` (the mapping's model is used)");
      d.addNote({out.mapping->span, "the mapping is declared here"});
      ok = false;
    }
  }
  if (!out.from.empty())
    for (const auto& prev : earlier)
      if (prev.name == out.from && prev.model != out.model &&
          (prev.model->layers.size() != out.model->layers.size() || prev.model->name != out.model->name)) {
        auto& d = ev_.error(code::kModelMismatch, entry.fromSpan,
                            "phase `" + entry.name + "` starts from phase `" + prev.name + "`, which trains `" +
                                prev.model->name + "`, but it trains `" + out.model->name + "`",
                            "a phase continues from another's weights, so both must train the same model");
        d.addNote({prev.span, "phase `" + prev.name + "` is declared here"});
        ok = false;
      }
  const Value* precisionValue = phaseField(ph, tr, "precision");
  out.precision = precision(precisionValue);
  if (precisionValue != nullptr && precisionValue->kind == ValueKind::Record)
    if (const Value* ls = precisionValue->record->get("loss_scale")) out.lossScaleSpan = ls->span;
  const Value* optv = phaseField(ph, tr, "optimizer");
  if (optv == nullptr) {
    ev_.error(code::kMissingSetting, entry.nameSpan, "phase `" + entry.name + "` has no `optimizer`",
              "add e.g. `optimizer: lamb(weight_decay: 0.01)` to the training");
    ok = false;
  }
  out.optimizer = optimizer(optv);
  out.dataset = dataset(phaseField(ph, tr, "dataset"));
  auto whole = [&](const char* f) -> long long {
    const Value* v = phaseField(ph, tr, f);
    return v != nullptr && v->isNumber() ? static_cast<long long>(v->number) : 0;
  };
  out.seqLen = whole("seq_len");
  if (const Value* sw = phaseField(ph, tr, "software"); sw != nullptr && sw->kind == ValueKind::String) out.software = sw->text;
  out.deviceIterations = std::max(1LL, whole("device_iterations"));
  out.maskedTokens = whole("masked_tokens");
  out.imageSize = whole("image_size");
  if (const Value* ls = phaseField(ph, tr, "label_smoothing"); ls != nullptr && ls->isNumber()) out.labelSmoothing = ls->number;
  if (out.labelSmoothing > 0) {
    if (std::none_of(out.model->layers.begin(), out.model->layers.end(), classifiesSamples))
      ev_.warning(code::kLabelSmoothingUnused, phaseFieldSpan(ph, tr, "label_smoothing", entry.nameSpan),
                  "`label_smoothing` has no effect: model `" + out.model->name + "` has no loss that classifies samples",
                  "remove it (it applies to `pooled_fc`, `token_classifier`, `softmax_loss` and `pooled_classifier`; "
                  "MLM and LM heads train on plain labels)");
  }
  if (out.maskedTokens > 0 && out.seqLen > 0 && out.maskedTokens > out.seqLen) {
    ev_.error(code::kMaskedTokens, phaseFieldSpan(ph, tr, "masked_tokens", entry.nameSpan),
              "phase `" + entry.name + "` masks " + std::to_string(out.maskedTokens) + " tokens of a " +
                  std::to_string(out.seqLen) + "-token sequence",
              "BERT masks about 15% of the tokens: about " +
                  std::to_string(static_cast<long long>(std::ceil(0.15 * static_cast<double>(out.seqLen)))) +
                  " for seq_len " + std::to_string(out.seqLen));
    ok = false;
  }
  if (!batch(ph, tr, *out.mapping, out.batch, entry.nameSpan)) ok = false;

  const Value* steps = phaseField(ph, tr, "steps");
  const Value* epochs = phaseField(ph, tr, "epochs");
  if (steps != nullptr && epochs != nullptr) {
    ev_.error(code::kStepsAndEpochs, phaseFieldSpan(ph, tr, "epochs", entry.nameSpan),
              "phase `" + entry.name + "` sets both `steps` and `epochs`", "keep one of them");
    ok = false;
  } else if (steps == nullptr && epochs == nullptr) {
    ev_.error(code::kStepsAndEpochs, entry.nameSpan, "phase `" + entry.name + "` needs `steps` or `epochs`",
              "add e.g. `steps: 1000`");
    ok = false;
  } else if (steps != nullptr) {
    out.steps = static_cast<long long>(steps->number);
  } else if (out.dataset.samples <= 0) {
    ev_.error(code::kEpochsNeedSamples, phaseFieldSpan(ph, tr, "epochs", entry.nameSpan),
              "phase `" + entry.name + "` trains for epochs, but the size of its dataset is unknown",
              "set `samples` on the dataset (ImageNet has 1,281,167), or give `steps`");
    ok = false;
  } else if (out.batch.globalBatch > 0) {
    out.epochs = epochs->number;
    out.steps = static_cast<long long>(std::ceil(out.epochs * out.dataset.samples /
                                                 (static_cast<double>(out.batch.globalBatch) * out.dataset.sequencesPerPack)));
  }
  const Value* lr = phaseField(ph, tr, "lr");
  if (lr == nullptr) {
    ev_.error(code::kMissingSetting, entry.nameSpan, "phase `" + entry.name + "` has no learning rate",
              "add e.g. `lr: 0.006 warmup 2000 steps then linear to 0`");
    ok = false;
  } else if (ok && (out.lrSpan = lr->span, !schedule(*lr, out, out.lr))) {
    ok = false;
  }
  if (!ok) return false;

  // Cost the model's layers for this phase.
  out.modelValue = mapv->record->get("model")->model;
  out.lrValue = *lr;
  return costLayers(out, entry.nameSpan, nullptr);
}

bool Resolver::costLayers(PhaseSpec& out, Span phaseSpan, LayerCostCache* cache) {
  LayerCostCache::Key key{out.modelValue.get(), out.batch.microBatch, out.seqLen, out.maskedTokens, out.imageSize};
  if (cache != nullptr)
    if (auto hit = cache->find(key)) {
      out.layers = std::move(hit);
      return true;
    }
  PhaseContext ctx;
  ctx.structural = false;
  ctx.phaseName = out.name;
  ctx.phaseSpan = phaseSpan;
  ctx.microBatch = Value::integral(out.batch.microBatch);
  if (out.seqLen > 0) ctx.seqLen = Value::integral(out.seqLen);
  if (out.maskedTokens > 0) ctx.maskedTokens = Value::integral(out.maskedTokens);
  if (out.imageSize > 0) ctx.imageSize = Value::integral(out.imageSize);
  auto st = expandModel(ev_, *out.modelValue, ctx);
  if (st->leaves.size() != out.model->structure->leaves.size()) {
    ev_.error(code::kPhaseVariable, phaseSpan,
              "in phase `" + out.name + "`, `" + out.model->name + "` has " + std::to_string(st->leaves.size()) +
                  " layers instead of " + std::to_string(out.model->structure->leaves.size()),
              "a model's layers cannot depend on micro_batch, seq_len, masked_tokens or image_size");
    return false;
  }
  std::size_t before = ev_.diags().errorCount();
  auto layers = std::make_shared<std::vector<LayerFacts>>();
  layers->reserve(st->leaves.size());
  LayerFactsMemo memo;
  for (const auto& leaf : st->leaves) layers->push_back(layerFacts(ev_, leaf, ctx, &memo));
  out.layers = layers;
  if (ev_.diags().errorCount() != before) return false;
  if (cache != nullptr) cache->put(key, out.layers);
  return true;
}

bool Resolver::rederive(PhaseSpec& ph, const ir::Batch& batch, LayerCostCache& cache) {
  const std::size_t before = ev_.diags().errorCount();
  ph.batch = batch;
  if (ph.epochs > 0 && ph.dataset.samples > 0 && batch.globalBatch > 0)
    ph.steps = static_cast<long long>(
        std::ceil(ph.epochs * ph.dataset.samples / (static_cast<double>(batch.globalBatch) * ph.dataset.sequencesPerPack)));
  ph.lr = ir::LrSchedule{};
  if (!schedule(ph.lrValue, ph, ph.lr) && ev_.diags().errorCount() != before) return false;
  return costLayers(ph, ph.span, &cache);
}

bool Resolver::training(const Record& rec, TrainingSpec& out) {
  out.name = rec.name;
  out.span = rec.span;
  out.seed = static_cast<long long>(num(rec, "seed", 0));
  if (const Value* h = rec.get("hooks"); h != nullptr && h->kind == ValueKind::List)
    for (const auto& x : *h->list)
      if (x.kind == ValueKind::Record) out.hooks.push_back(x.record->name);
  if (rec.phases.empty()) {
    ev_.error(code::kNoPhases, rec.span, "training `" + rec.name + "` has no phase",
              "add `phase NAME { micro_batch: ..., global_batch: ..., steps: ..., lr: ... }`");
    return false;
  }
  bool ok = true;
  for (const auto& entry : rec.phases) {
    PhaseSpec ps;
    if (phase(rec, entry, out.phases, ps)) out.phases.push_back(std::move(ps));
    else ok = false;
  }
  return ok;
}

HookSpec Resolver::hook(const Record& rec) {
  HookSpec h;
  h.name = rec.name;
  h.span = rec.span;
  const Value* v = rec.get("lua");
  if (v == nullptr || v->kind != ValueKind::Lua || v->lua == nullptr) return h;
  const syntax::LuaExpr& lua = *v->lua;
  if (lua.form == syntax::LuaForm::File) {
    h.file = true;
    h.path = lua.text;
    h.sourceSpan = lua.textSpan;
  } else {
    h.source = lua.text;
    h.sourceSpan = lua.textSpan;
  }
  return h;
}

}  // namespace ipu::check
