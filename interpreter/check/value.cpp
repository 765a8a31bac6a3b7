#include "interpreter/check/value.h"

#include <cmath>

namespace ipu::check {

const char* describe(ValueKind k) {
  switch (k) {
    case ValueKind::Unknown: return "unknown value";
    case ValueKind::Number: return "number";
    case ValueKind::Bool: return "boolean";
    case ValueKind::String: return "string";
    case ValueKind::Symbol: return "name";
    case ValueKind::List: return "list";
    case ValueKind::Range: return "range";
    case ValueKind::Record: return "record";
    case ValueKind::Template: return "definition";
    case ValueKind::Builtin: return "built-in function";
    case ValueKind::Module: return "module";
    case ValueKind::Model: return "model";
    case ValueKind::Layer: return "layer";
    case ValueKind::LayerRef: return "layer reference";
    case ValueKind::Selection: return "layer selection";
    case ValueKind::Pipeline: return "pipeline";
    case ValueKind::Lua: return "Lua code";
    case ValueKind::Schedule: return "learning-rate schedule";
  }
  return "value";
}

Value Value::num(double n, Dim d, Span s) {
  Value v;
  v.kind = ValueKind::Number;
  v.number = n;
  v.dim = d;
  v.span = s;
  v.integer = d.dimensionless() && std::isfinite(n) && n == std::floor(n);
  return v;
}

Value Value::integral(long long n, Span s) {
  Value v = num(static_cast<double>(n), Dim::none(), s);
  v.integer = true;
  return v;
}

Value Value::boolean_(bool b, Span s) {
  Value v;
  v.kind = ValueKind::Bool;
  v.boolean = b;
  v.span = s;
  return v;
}

Value Value::str(std::string t, Span s) {
  Value v;
  v.kind = ValueKind::String;
  v.text = std::move(t);
  v.span = s;
  return v;
}

Value Value::symbol(std::string t, Span s) {
  Value v;
  v.kind = ValueKind::Symbol;
  v.text = std::move(t);
  v.span = s;
  return v;
}

Value Value::ofList(std::vector<Value> items, Span s) {
  Value v;
  v.kind = ValueKind::List;
  v.list = std::make_shared<const std::vector<Value>>(std::move(items));
  v.span = s;
  return v;
}

bool Value::isWhole() const {
  return kind == ValueKind::Number && dim.dimensionless() && std::isfinite(number) && number == std::floor(number);
}

std::string Value::show() const {
  switch (kind) {
    case ValueKind::Unknown: return "<unknown>";
    case ValueKind::Number: return percent ? formatNumber(number * 100) + "%" : formatQuantity(number, dim);
    case ValueKind::Bool: return boolean ? "true" : "false";
    case ValueKind::String: return "\"" + text + "\"";
    case ValueKind::Symbol: return text;
    case ValueKind::List: {
      std::string s = "[";
      for (std::size_t i = 0; i < list->size(); ++i) {
        if (i) s += ", ";
        if (i == 20) { s += "..."; break; }
        s += (*list)[i].show();
      }
      return s + "]";
    }
    case ValueKind::Range: return std::to_string(lo) + ".." + std::to_string(hi);
    case ValueKind::Record: return record->name.empty() ? record->kind + " { ... }" : record->kind + " " + record->name;
    case ValueKind::Template: return std::string(syntax::spelling(tmpl->decl->declKind)) + " " + tmpl->decl->name + "(...)";
    case ValueKind::Builtin: return "built-in " + text;
    case ValueKind::Module: return "module \"" + module->path + "\"";
    case ValueKind::Model: return "model " + model->name;
    case ValueKind::Layer: return "layer " + layer->decl->name + "(...)";
    case ValueKind::LayerRef: return "layer " + text;
    case ValueKind::Selection: return "layers";
    case ValueKind::Pipeline:
      return pipeline->kind == PipelineValue::Kind::Balanced ? "balanced(" + std::to_string(pipeline->ipus) + ")"
             : pipeline->kind == PipelineValue::Kind::Lua   ? "lua pipeline"
                                                            : "pipeline { ... }";
    case ValueKind::Lua: return "lua ...";
    case ValueKind::Schedule: return "schedule";
  }
  return "?";
}

std::string Value::describe() const {
  switch (kind) {
    case ValueKind::Number:
      if (dim.dimensionless()) return "number `" + show() + "`";
      return dim.describe() + " `" + show() + "`";
    case ValueKind::Record:
      if (record->kind.empty()) return "a record `{ ... }`";
      return record->name.empty() ? record->kind : record->kind + " `" + record->name + "`";
    case ValueKind::Symbol: return "`" + text + "`";
    case ValueKind::String: return "string " + show();
    case ValueKind::Model: return "model `" + model->name + "`";
    case ValueKind::Template: return std::string(syntax::spelling(tmpl->decl->declKind)) + " definition `" + tmpl->decl->name + "`";
    case ValueKind::Builtin: return "built-in `" + text + "`";
    default: return check::describe(kind);
  }
}

const RecordField* Record::field(const std::string& n) const {
  for (const auto& f : fields)
    if (f.name == n) return &f;
  return nullptr;
}

void Record::set(const std::string& n, Value v, Span nameSpan) {
  for (auto& f : fields)
    if (f.name == n) {
      f.value = std::move(v);
      f.nameSpan = nameSpan;
      f.inherited = false;
      return;
    }
  fields.push_back(RecordField{n, std::move(v), nameSpan, false});
}

std::string pathString(const std::vector<PathPart>& parts) {
  std::string s;
  for (const auto& p : parts) {
    if (!s.empty()) s += '.';
    s += p.name;
    if (p.index >= 0) s += "[" + std::to_string(p.index) + "]";
  }
  return s;
}

}  // namespace ipu::check
