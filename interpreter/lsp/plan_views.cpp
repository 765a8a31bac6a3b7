#include "interpreter/lsp/plan_views.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

#include "interpreter/check/units.h"
#include "interpreter/lsp/background_search.h"
#include "interpreter/lsp/workspace.h"

namespace ipu::lsp {

namespace {

using check::formatBytes;
using check::formatPercent;

// A phase of the plan and the run it belongs to.
struct Use {
  const ir::RunPlan* run = nullptr;
  const ir::PhasePlan* phase = nullptr;
};

// The phases planned with the mapping declared at `line` (1-based) of `path`.
std::vector<Use> phasesUsing(const ir::ExecutionPlan& plan, const std::string& path, std::uint32_t line) {
  std::vector<Use> out;
  for (const auto& run : plan.runs)
    for (const auto& phase : run.phases)
      if (phase.mapping.source.file == path && phase.mapping.source.line == line) out.push_back({&run, &phase});
  return out;
}

// "4,942", or three significant digits below 100 ("12.3").
std::string grouped(double v) {
  char buf[64];
  if (!std::isfinite(v)) return "?";
  if (std::fabs(v) < 100) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string digits = buf, out;
  const std::size_t sign = digits[0] == '-' ? 1 : 0;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "1.23 TFLOP", "512 MFLOP".
std::string flops(double v) {
  static const char* const units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, units[i]);
  return buf;
}

// "25.2 M" parameters.
std::string count(double v) {
  static const char* const units[] = {"", " K", " M", " B", " T"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g%s", v, units[i]);
  return buf;
}

// The fullest IPU of the phase (of one replica), or null.
const ir::Ipu* fullest(const ir::PhasePlan& p) {
  const ir::Ipu* worst = nullptr;
  for (const auto& ipu : p.ipus)
    if (worst == nullptr || ipu.memory.total() > worst->memory.total()) worst = &ipu;
  return worst;
}

// The fullest IPU of pipeline IPU `n`'s shard group, or null.
const ir::Ipu* fullestOf(const ir::PhasePlan& p, long long n) {
  const ir::Ipu* worst = nullptr;
  for (const auto& ipu : p.ipus)
    if (ipu.ipu == n && (worst == nullptr || ipu.memory.total() > worst->memory.total())) worst = &ipu;
  return worst;
}

double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

std::string phaseName(const Use& u) { return "`" + u.run->name + "." + u.phase->name + "`"; }

// The mapping declarations of the document, with the 1-based line each starts on.
struct MappingDecl {
  const syntax::Declaration* decl;
  std::uint32_t line;
};
std::vector<MappingDecl> mappingDeclarations(const Analysis& a) {
  std::vector<MappingDecl> out;
  if (a.program == nullptr) return out;
  for (const auto& item : a.program->items)
    if (const auto* d = item->dyn<syntax::Declaration>(); d != nullptr && d->declKind == syntax::DeclKind::Mapping)
      out.push_back({d, sessionLineCol(a.text(), d->span.begin).line});
  return out;
}

// The stages written in a mapping's `pipeline { }` block.
std::vector<const syntax::StageMember*> stagesOf(const syntax::Declaration& d) {
  std::vector<const syntax::StageMember*> out;
  if (d.body == nullptr) return out;
  for (const auto& m : d.body->members)
    if (const auto* b = m->dyn<syntax::BlockMember>(); b != nullptr && b->name == "pipeline" && b->block != nullptr)
      for (const auto& s : b->block->members)
        if (const auto* stage = s->dyn<syntax::StageMember>()) out.push_back(stage);
  return out;
}

bool contains(base::Span s, std::size_t offset) { return offset >= s.begin && offset < std::max(s.end, s.begin + 1); }

// A lens's text for one phase.
// `searches`, when given, adds the search's figure or, when it has none yet,
// the phase to `unsearched`.
std::string lensTitle(Workspace& workspace, const Use& u, bool named, BackgroundSearch* searches,
                      std::vector<BackgroundSearch::Phase>& unsearched) {
  const ir::PhasePlan& p = *u.phase;
  std::string title = named ? phaseName(u) + ": " : "";
  title += p.fits ? "fits" : "does not fit";
  if (const ir::Ipu* peak = fullest(p))
    title += " · peak " + formatBytes(peak->memory.total()) + " (" + formatPercent(share(peak->memory.total(), peak->capacityBytes)) +
             ") on IPU " + std::to_string(peak->index);
  // A throughput of a mapping that cannot run would be a figure of nothing.
  if (!p.fits) return title;
  auto figures = workspace.estimateOf(p);
  if (figures->estimate.ok) title += " · " + grouped(figures->estimate.samplesPerSecond) + " samples/s";
  else if (!figures->problems.empty()) title += " · no estimate: " + figures->problems.front().message;
  // The search compares throughputs: none without an estimate of yours.
  if (searches == nullptr || !figures->estimate.ok) return title;
  if (auto found = searches->figure(figures->key)) {
    if (!found->empty()) title += " · " + *found;
  } else {
    unsearched.push_back({u.run->name, p.name, figures->key});
  }
  return title;
}

// The layers of `p` a stage's layer path names: those on the stage's IPU
// whose names are the path's first name or below it (a layer is placed
// once, so these are the ones the path puts there).
std::vector<const ir::Layer*> layersNamed(const ir::PhasePlan& p, const std::string& root, std::optional<long long> ipu) {
  std::vector<const ir::Layer*> out;
  for (const auto& l : p.layers) {
    if (ipu && l.ipu != *ipu) continue;
    if (l.name == root || l.name.rfind(root + "[", 0) == 0 || l.name.rfind(root + ".", 0) == 0) out.push_back(&l);
  }
  return out;
}

std::string describeLayers(const ir::PhasePlan& p, const std::vector<const ir::Layer*>& layers) {
  double params = 0, forward = 0, backward = 0, weights = 0, activations = 0, code = 0;
  std::vector<int> ipus;
  for (const ir::Layer* l : layers) {
    params += l->params;
    forward += l->forward.total();
    backward += l->backward.total();
    weights += l->params * ir::bytesOf(p.precision.weights);
    activations += l->activationElements * ir::bytesOf(p.precision.compute);
    code += l->codeBytes;
    if (std::find(ipus.begin(), ipus.end(), l->ipu) == ipus.end()) ipus.push_back(l->ipu);
  }
  std::sort(ipus.begin(), ipus.end());
  std::string where;
  for (std::size_t i = 0; i < ipus.size(); ++i) where += (i ? ", " : "") + std::to_string(ipus[i]);
  std::string s = std::to_string(layers.size()) + (layers.size() == 1 ? " layer (`" + layers[0]->name + "`)" : " layers") +
                  " on IPU" + (ipus.size() == 1 ? " " : "s ") + where + "\n\n";
  s += "| | |\n|---|---:|\n";
  s += "| parameters | " + count(params) + " |\n";
  s += "| forward | " + flops(forward) + " per micro batch |\n";
  s += "| backward | " + flops(backward) + " per micro batch |\n";
  s += "| weights | " + formatBytes(weights) + " |\n";
  s += "| activations kept | " + formatBytes(activations) + " per micro batch |\n";
  s += "| code | " + formatBytes(code) + " |";
  return s;
}

std::string describeIpu(const ir::PhasePlan& p, const ir::Ipu& ipu, long long n) {
  const ir::MemoryBreakdown& m = ipu.memory;
  std::string s = "**IPU " + std::to_string(n) + "**: " + formatBytes(m.total()) + " of " + formatBytes(ipu.capacityBytes) +
                  " (" + formatPercent(share(m.total(), ipu.capacityBytes)) + ")" + (ipu.fits ? ", fits" : ", does not fit");
  int group = 0;
  for (const auto& other : p.ipus) group += other.ipu == n ? 1 : 0;
  if (group > 1) s += " (the fullest of its " + std::to_string(group) + " shard IPUs, IPU " + std::to_string(ipu.index) + ")";
  s += "\n\n| memory | | of capacity |\n|---|---:|---:|\n";
  const std::pair<const char*, double> rows[] = {
      {"weights", m.weights},   {"optimizer state", m.optimizerState}, {"gradient accumulators", m.gradientAccumulators},
      {"activations", m.activations}, {"code", m.code}, {"exchange buffers", m.exchange}, {"temporaries", m.temporaries},
  };
  for (const auto& [name, bytes] : rows)
    s += std::string("| ") + name + " | " + formatBytes(bytes) + " | " + formatPercent(share(bytes, ipu.capacityBytes)) + " |\n";
  s += "| **total** | " + formatBytes(m.total()) + " | " + formatPercent(share(m.total(), ipu.capacityBytes)) + " |";
  if (ipu.streamingBytes > 0)
    s += "\n\nStreaming Memory: " + formatBytes(ipu.streamingBytes) + " of its share " + formatBytes(ipu.streamingCapacityBytes);
  return s;
}

// The leading name of a layer path (`encoder` of `encoder[0..4]`).
std::string rootName(const std::string& text, const syntax::Expr& e) {
  std::size_t end = e.span.begin;
  while (end < e.span.end && end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
    ++end;
  return text.substr(e.span.begin, end - e.span.begin);
}

}  // namespace

Json codeLenses(Workspace& workspace, const Analysis& a, BackgroundSearch* searches) {
  Json out = Json::array();
  const auto decls = mappingDeclarations(a);
  if (decls.empty()) return out;
  auto plan = workspace.planOf(a);
  if (plan == nullptr) return out;
  std::vector<BackgroundSearch::Phase> unsearched;
  for (const auto& [decl, line] : decls) {
    const Json range = workspace.range(a.text(), decl->span.begin, decl->nameSpan.end);
    const std::vector<Use> uses = phasesUsing(*plan, a.document.path, line);
    if (uses.empty()) {
      out.push_back(Json{{"range", range}, {"command", Json{{"title", "no training uses `" + decl->name + "`"}, {"command", ""}}}});
      continue;
    }
    for (const Use& u : uses)
      out.push_back(Json{{"range", range},
                         {"command", Json{{"title", lensTitle(workspace, u, uses.size() > 1, searches, unsearched)}, {"command", ""}}}});
  }
  if (!unsearched.empty()) {
    // The texts this version was checked with: the search checks them again in a session of its own.
    BackgroundSearch::Request request{a.document.uri, a.document.version, a.document.path, a.document.text, {}, std::move(unsearched)};
    for (const auto& d : workspace.documents().all())
      if (d.uri != a.document.uri && !workspace.standardLibrary().standardPathOf(d.uri)) request.others.emplace_back(d.path, d.text);
    searches->want(std::move(request));
  }
  return out;
}

Json inlayHints(Workspace& workspace, const Analysis& a, const Range& range) {
  Json out = Json::array();
  const auto decls = mappingDeclarations(a);
  if (decls.empty()) return out;
  std::shared_ptr<const ir::ExecutionPlan> plan;
  const PositionEncoding encoding = workspace.encoding();
  for (const auto& [decl, line] : decls) {
    const auto stages = stagesOf(*decl);
    if (stages.empty()) continue;
    if (plan == nullptr) plan = workspace.planOf(a);
    if (plan == nullptr) return out;
    const std::vector<Use> uses = phasesUsing(*plan, a.document.path, line);
    if (uses.empty()) continue;
    const ir::PhasePlan& p = *uses.front().phase;
    double total = 0;
    for (const auto& l : p.layers) total += l.forward.total() + l.backward.total();
    for (const syntax::StageMember* s : stages) {
      const Position at = a.lines->positionOf(s->span.end, encoding);
      if (at < range.start || range.end < at) continue;
      const ir::Ipu* ipu = fullestOf(p, s->index);
      if (ipu == nullptr) continue;
      double mine = 0;
      for (const auto& l : p.layers)
        if (l.ipu == s->index) mine += l.forward.total() + l.backward.total();
      std::string label = formatBytes(ipu->memory.total()) + " (" + formatPercent(share(ipu->memory.total(), ipu->capacityBytes)) +
                          ") · " + formatPercent(share(mine, total)) + " of FLOPs";
      if (uses.size() > 1) label += " · " + phaseName(uses.front());
      out.push_back(Json{{"position", toJson(at)}, {"label", label}, {"paddingLeft", true}});
    }
  }
  return out;
}

std::optional<std::string> planHover(Workspace& workspace, const Analysis& a, Position position) {
  if (a.program == nullptr) return std::nullopt;
  const std::size_t offset = a.lines->offsetOf(position, workspace.encoding());
  // In a mapping's stage: the IPU, or a layer path.
  for (const auto& [decl, line] : mappingDeclarations(a)) {
    if (!contains(decl->span, offset)) continue;
    for (const syntax::StageMember* s : stagesOf(*decl)) {
      if (!contains(s->span, offset)) continue;
      auto plan = workspace.planOf(a);
      if (plan == nullptr) return std::nullopt;
      const std::vector<Use> uses = phasesUsing(*plan, a.document.path, line);
      if (uses.empty()) return std::nullopt;
      const ir::PhasePlan& p = *uses.front().phase;
      const std::string of = uses.size() > 1 ? "\n\nphase " + phaseName(uses.front()) + " (the first of " +
                                                   std::to_string(uses.size()) + " that use `" + decl->name + "`)"
                                             : "";
      for (const auto& e : s->layers)
        if (contains(e->span, offset)) {
          const std::string root = rootName(a.text(), *e);
          auto layers = layersNamed(p, root, s->index);
          if (root.empty() || layers.empty()) return std::nullopt;
          return "**" + root + "**: " + describeLayers(p, layers) + of;
        }
      const ir::Ipu* ipu = fullestOf(p, s->index);
      if (ipu == nullptr) return std::nullopt;
      return describeIpu(p, *ipu, s->index) + of;
    }
    return std::nullopt;
  }
  // A layer declared in a model: its layers in the first phase that trains the model.
  for (const auto& item : a.program->items) {
    const auto* d = item->dyn<syntax::Declaration>();
    if (d == nullptr || d->declKind != syntax::DeclKind::Model || d->body == nullptr || !contains(d->span, offset)) continue;
    std::string name;
    for (const auto& m : d->body->members) {
      if (const auto* l = m->dyn<syntax::LayerMember>(); l != nullptr && contains(l->nameSpan, offset)) name = l->name;
      if (const auto* r = m->dyn<syntax::RepeatMember>(); r != nullptr && contains(r->nameSpan, offset)) name = r->name;
    }
    if (name.empty()) return std::nullopt;
    auto plan = workspace.planOf(a);
    if (plan == nullptr) return std::nullopt;
    for (const auto& run : plan->runs)
      for (const auto& p : run.phases) {
        if (p.model != d->name) continue;
        auto layers = layersNamed(p, name, std::nullopt);
        if (layers.empty()) return std::nullopt;
        return "**" + name + "** in phase " + phaseName(Use{&run, &p}) + ": " + describeLayers(p, layers);
      }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace ipu::lsp
