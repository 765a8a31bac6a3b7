#include "interpreter/plan/expand_layers.h"

#include <cstring>
#include <map>

namespace ipu::plan {

ir::SourceRef sourceRef(const base::SourceMap& sources, base::Span span) {
  ir::SourceRef ref;
  const base::SourceFile* f = sources.find(span.file);
  if (f == nullptr) return ref;
  base::LineCol lc = f->lineCol(span.begin);
  ref.file = f->path();
  ref.line = lc.line;
  ref.column = lc.column;
  return ref;
}

void expandLayers(PhaseContext& ctx) {
  const check::PhaseSpec& ph = ctx.phase;
  ir::PhasePlan& p = ctx.plan;
  p.name = ph.name;
  p.from = ph.from;
  p.source = sourceRef(ctx.sources, ph.span);
  p.model = ph.model->name;
  p.pod = ctx.mapping.pod;
  p.mapping = ctx.settings;
  p.mapping.source = sourceRef(ctx.sources, ctx.mapping.span);
  p.precision = ph.precision;
  p.optimizer = ph.optimizer;
  p.lr = ph.lr;
  p.dataset = ph.dataset;
  p.batch = ph.batch;
  p.batch.replicas = ctx.settings.replicas;
  p.seqLen = ph.seqLen;
  p.software = ph.software;
  p.deviceIterations = ph.deviceIterations;
  p.maskedTokens = ph.maskedTokens;
  p.imageSize = ph.imageSize;
  p.labelSmoothing = ph.labelSmoothing;
  p.steps = ph.steps;
  p.epochs = ph.epochs;
  p.parameters = ph.model->parameters;
  p.layers.clear();
  const double scaleKey = p.pod.machine.chip.tiles;
  if (ctx.expansions != nullptr) {
    auto it = ctx.expansions->entries.find({ph.layers.get(), scaleKey});
    if (it != ctx.expansions->entries.end()) {
      p.layers = it->second->layers;
      ctx.tiedPartners = it->second->tiedPartners;
      ctx.codeClass = it->second->codeClass;
      return;
    }
  }
  // A layer's `code` in the standard library is for a full 1,472-tile chip
  // (GC200, Bow). Code and vertex state live on every tile a layer uses, so a
  // chip with fewer tiles holds proportionally less.
  constexpr double kCodeReferenceTiles = 1472;
  const double codeScale = p.pod.machine.chip.tiles > 0 ? p.pod.machine.chip.tiles / kCodeReferenceTiles : 1.0;
  for (const auto& f : *ph.layers) {
    ir::Layer l;
    l.name = f.path;
    ir::setOpName(l, f.op);
    l.definition = f.definition;
    l.source = sourceRef(ctx.sources, f.span);
    l.params = f.params;
    l.tiedTo = f.tiedTo;
    l.tiedParams = f.tiedParams;
    l.shardable = f.shardable;
    l.forward = f.forward;
    l.backward = f.backward;
    l.activationElements = f.activations;
    l.inputElements = f.input;
    l.outputElements = f.output;
    l.workspaceElements = f.workspace;
    l.codeBytes = f.codeBytes * codeScale;
    l.ops = f.ops;
    l.attributes = f.attributes;
    p.layers.push_back(std::move(l));
  }
  const std::size_t n = p.layers.size();
  ctx.tiedPartners.assign(n, {});
  ctx.codeClass.assign(n, 0);
  std::map<std::string, int> classes;
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Layer& l = p.layers[i];
    std::string key = l.definition;
    // The number's bytes, not its decimal text: this runs for every plan the
    // mapping search makes, and formatting doubles dominated it.
    for (const auto& a : l.attributes) {
      char bits[sizeof(double)];
      std::memcpy(bits, &a.number, sizeof bits);
      key.append("|").append(a.name).append("=").append(bits, sizeof bits).append(a.text);
    }
    ctx.codeClass[i] = classes.emplace(key, static_cast<int>(classes.size())).first->second;
    if (l.tiedTo.empty()) continue;
    for (std::size_t k = 0; k < n; ++k) {
      const std::string& name = p.layers[k].name;
      if (name == l.tiedTo || name.rfind(l.tiedTo + ".", 0) == 0 || name.rfind(l.tiedTo + "[", 0) == 0)
        ctx.tiedPartners[i].push_back(static_cast<int>(k));
    }
  }
  if (ctx.expansions != nullptr)
    ctx.expansions->entries[{ph.layers.get(), scaleKey}] =
        std::make_shared<const ExpandedLayers>(ExpandedLayers{ph.layers, p.layers, ctx.tiedPartners, ctx.codeClass});
}

}  // namespace ipu::plan
