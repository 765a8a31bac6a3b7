#include "interpreter/check/checker.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"

namespace ipu::check {

Checker::Checker(base::SourceMap& sources, base::Diagnostics& diags, const Prelude* prelude, ModuleCache* cache)
    : sources_(sources), diags_(diags), loader_(std::make_unique<ModuleLoader>(sources, diags, prelude, cache)),
      evaluator_(std::make_unique<Evaluator>(diags, *loader_)) {}

Checker::~Checker() = default;

namespace {

// Evaluate a definition with parameters once with unknown arguments, so that
// mistakes in its body (unknown names, misplaced members, bad fields) are
// reported even if nothing calls it yet.
void probeTemplate(Evaluator& ev, const Template& t) {
  const syntax::Declaration& d = *t.decl;
  auto scope = std::make_shared<Scope>(t.scope);
  for (const auto& p : d.params) scope->define(p.name, Value::unknown(p.span), p.span);
  PhaseContext structural;
  if (d.declKind == syntax::DeclKind::Model && d.body) {
    ModelValue m;
    m.name = d.name;
    m.body = d.body.get();
    m.decl = &d;
    m.scope = scope;
    m.span = d.nameSpan;
    auto st = expandModel(ev, m, structural);
    LayerFactsMemo memo;
    for (const auto& leaf : st->leaves) layerFacts(ev, leaf, structural, &memo);
  } else if (d.declKind == syntax::DeclKind::Layer && d.body) {
    structural.bind(*scope);
    ev.buildRecord("layer", *d.body, scope, nullptr, d.name, d.nameSpan);
  } else if (d.body || d.value) {
    ev.declaredRecord(d, scope, d.nameSpan);
  }
}

}  // namespace

std::unique_ptr<CheckedProgram> Checker::checkFile(base::FileId rootFile, const Overrides* overrides) {
  const std::size_t errorsBefore = diags_.errorCount();
  Module* root = loader_->loadRoot(rootFile);
  root_ = root;
  if (root == nullptr || !root->program || diags_.errorCount() > errorsBefore) return nullptr;
  Evaluator& ev = *evaluator_;
  Resolver resolver(ev);
  auto program = std::make_unique<CheckedProgram>();

  // Evaluate every declaration in the user's own modules.
  std::vector<std::pair<std::string, const Value*>> rootValues;
  // Evaluation may load more modules (standard ones, for "did you mean"
  // suggestions): walk a snapshot of the user's modules, not the live list.
  std::vector<const Module*> userModules;
  for (const auto& mod : loader_->modules())
    if (!mod->standard && mod->program) userModules.push_back(mod.get());
  for (const Module* mod : userModules) {
    ModuleScope& scope = ev.scopeOf(*mod);
    scope.index(ev);
    for (const auto& item : mod->program->items) {
      if (diags_.full()) break;
      std::string name;
      if (const auto* d = item->dyn<syntax::Declaration>()) name = d->name;
      else if (const auto* l = item->dyn<syntax::LetItem>()) name = l->name;
      else continue;
      const Value* v = scope.lookupOwn(name, ev, {});
      if (v == nullptr) continue;
      if (v->kind == ValueKind::Template) probeTemplate(ev, *v->tmpl);
      if (mod == root) rootValues.emplace_back(name, v);
      if (v->kind == ValueKind::Record && v->record->kind == "mapping" && !v->record->name.empty()) {
        if (auto spec = resolver.mapping(*v)) program->mappings.push_back(spec);
      }
      if (v->kind == ValueKind::Model) resolver.model(*v);
      if (v->kind == ValueKind::Record && v->record->kind == "hook") program->hooks.push_back(resolver.hook(*v->record));
    }
  }

  // A trial's values replace the script's in the training they are for.
  bool overridden = false;
  // Values for every training that runs ("" training) apply to those only:
  // a training the script does not run need not have the paths.
  auto trainingRecord = [&](const Value& v, bool runs) -> std::shared_ptr<const Record> {
    if (overrides == nullptr) return v.record;
    if (overrides->training.empty() ? !runs : v.record->name != overrides->training) return v.record;
    overridden = true;
    return applyOverrides(ev, *root, *v.record, *overrides);
  };
  auto resolveTraining = [&](const Value& v, TrainingSpec& t, bool runs = true) {
    auto rec = trainingRecord(v, runs);
    return rec != nullptr && resolver.training(*rec, t);
  };

  // What runs: `run` statements, or every training when there are none.
  std::set<std::string> seen;
  std::map<std::string, Span> runAt;
  for (const auto& item : root->program->items) {
    const auto* r = item->dyn<syntax::RunItem>();
    if (r == nullptr) continue;
    if (auto it = runAt.find(r->name); it != runAt.end()) {
      auto& d = ev.error(code::kDuplicateRun, r->nameSpan, "training `" + r->name + "` is already run",
                         "to run a variant, declare `training t2 = " + r->name + " with { ... }` and `run t2`");
      d.addNote({it->second, "first run here"});
      continue;
    }
    runAt[r->name] = r->nameSpan;
    const Value* v = ev.scopeOf(*root).lookup(r->name, ev, r->nameSpan);
    if (v == nullptr) {
      std::vector<std::string> trainings;
      for (const auto& [n, val] : rootValues)
        if (val->kind == ValueKind::Record && val->record->kind == "training") trainings.push_back(n);
      ev.error(code::kBadRun, r->nameSpan, "unknown training `" + r->name + "`", base::didYouMean(r->name, trainings));
      continue;
    }
    if (v->isUnknown()) continue;
    if (v->kind != ValueKind::Record || v->record->kind != "training") {
      std::string what = v->kind == ValueKind::Record ? "a " + v->record->kind : check::describe(v->kind);
      ev.error(code::kBadRun, r->nameSpan, "`run` needs a training, but `" + r->name + "` is " + what,
               "declare `training NAME { mapping: ..., phase ... }` and run that");
      continue;
    }
    TrainingSpec t;
    if (resolveTraining(*v, t)) program->runs.push_back(std::move(t));
  }
  if (runAt.empty()) {
    program->implicitRuns = true;
    for (const auto& [name, v] : rootValues) {
      if (v->kind != ValueKind::Record || v->record->kind != "training") continue;
      TrainingSpec t;
      if (resolveTraining(*v, t)) program->runs.push_back(std::move(t));
    }
  } else {
    // Trainings not run are still checked.
    for (const auto& [name, v] : rootValues)
      if (v->kind == ValueKind::Record && v->record->kind == "training" && !runAt.count(name)) {
        TrainingSpec t;
        resolveTraining(*v, t, /*runs=*/false);
      }
  }
  if (overrides != nullptr && !overridden && overrides->training.empty())
    ev.error(code::kBadRun, overrides->written.empty() ? overrides->at : overrides->written.front().pathAt,
             "the script runs no training to give this value to", "declare `training NAME { ... }` (and `run NAME`)");
  else if (overrides != nullptr && !overridden)
    ev.error(code::kBadSweep, overrides->at, "no training `" + overrides->training + "` to give the trial's values to",
             "a sweep's trials vary the training the sweep names");

  // Sweeps: each declaration checked into a SweepSpec (sweeps.h); those of the
  // script itself are the program's.
  for (const Module* mod : userModules) {
    std::vector<const syntax::Declaration*> sweeps;
    for (const auto& item : mod->program->items)
      if (const auto* d = item->dyn<syntax::Declaration>(); d != nullptr && d->declKind == syntax::DeclKind::Sweep)
        sweeps.push_back(d);
    for (const auto* d : sweeps) {
      if (diags_.full()) break;
      const TrainingSpec* run = nullptr;
      for (const auto& r : program->runs)
        if (d->forExpr && d->forExpr->dyn<syntax::NameExpr>() && r.name == d->forExpr->as<syntax::NameExpr>().name) run = &r;
      auto spec = checkSweep(ev, *mod, *d, sweeps, mod == root ? run : nullptr);
      if (spec && mod == root) program->sweeps.push_back(std::move(*spec));
    }
  }

  // Hooks: read file hooks; note which hooks trainings list (a hook no
  // training lists may still define a `lua NAME` function: the hooks layer
  // knows, once the code has run, and warns about the rest).
  std::set<std::string> used;
  for (const auto& [name, v] : rootValues)
    if (v->kind == ValueKind::Record && v->record->kind == "training")
      if (const Value* h = v->record->get("hooks"); h != nullptr && h->kind == ValueKind::List)
        for (const auto& x : *h->list)
          if (x.kind == ValueKind::Record) used.insert(x.record->name);
  program->hooksInTrainings.assign(used.begin(), used.end());
  // Lua functions named where a function is expected, once per name and role.
  auto addFunction = [&](LuaFunctionRef::Role role, const std::string& fn, Span at) {
    for (const auto& f : program->luaFunctions)
      if (f.role == role && f.name == fn) return;
    program->luaFunctions.push_back(LuaFunctionRef{role, fn, at});
  };
  for (const auto& m : program->mappings)
    if (m->pipelineKind == MappingSpec::PipelineKind::Lua)
      addFunction(LuaFunctionRef::Role::Placement, m->luaFunction, m->spanOf("pipeline"));
  for (const auto& run : program->runs)
    for (const auto& ph : run.phases) {
      if (!ph.lr.luaFunction.empty()) addFunction(LuaFunctionRef::Role::LearningRate, ph.lr.luaFunction, ph.lrSpan);
      if (!ph.precision.lossScale.luaFunction.empty())
        addFunction(LuaFunctionRef::Role::LossScale, ph.precision.lossScale.luaFunction, ph.lossScaleSpan);
    }
  for (auto& h : program->hooks) {
    if (h.file) {
      namespace fs = std::filesystem;
      fs::path base = fs::path(sources_.file(h.sourceSpan.file).path()).parent_path();
      fs::path p = fs::path(h.path).is_absolute() ? fs::path(h.path) : base / h.path;
      base::FileText file = base::readSourceFile(p.string());
      if (file.status != base::FileText::Status::Ok) {
        std::string why = file.status == base::FileText::Status::TooLarge
                              ? "it is " + std::to_string(file.bytes) + " bytes; the limit is 8 MiB"
                              : file.problem;
        if (file.status == base::FileText::Status::NotAFile) why = "it is " + file.problem + ", not a file";
        ev.error(code::kModuleNotFound, h.sourceSpan, "cannot read Lua file `" + h.path + "`: " + why,
                 "paths are relative to the script (" + (base.empty() ? std::string(".") : base.string()) + ")");
        continue;
      }
      h.source = std::move(file.text);
      h.path = p.lexically_normal().string();
    }
  }
  if (diags_.errorCount() > errorsBefore) return nullptr;
  return program;
}

}  // namespace ipu::check
