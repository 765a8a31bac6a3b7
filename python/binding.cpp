// The extension module ipu._ipu (docs/python.md). The package `ipu`
// (python/ipu/__init__.py) re-exports it and adds what is easier in Python.
#include "python/binding.h"

#include <pybind11/stl.h>
#include "interpreter/base/render.h"
#include "interpreter/syntax/format.h"

namespace ipu::python {

namespace {

// One diagnostic as Python sees it: the fields of its JSON form
// (docs/diagnostics.md), made by base::toJson so that both agree.
struct Diagnostic {
  std::string code, severity, message, help, rendered;
  py::object file = py::none(), line = py::none(), column = py::none(), endLine = py::none(), endColumn = py::none();
  py::list notes;
};

Diagnostic diagnosticOf(const base::Diagnostic& d, const base::SourceMap& sources) {
  ir::Json j = base::toJson(d, sources);
  Diagnostic out;
  out.code = j["code"].get<std::string>();
  out.severity = j["severity"].get<std::string>();
  out.message = j["message"].get<std::string>();
  out.help = j["help"].is_null() ? std::string() : j["help"].get<std::string>();
  out.rendered = j["rendered"].get<std::string>();
  out.file = toPython(j["file"]);
  out.line = toPython(j["line"]);
  out.column = toPython(j["column"]);
  out.endLine = toPython(j["end_line"]);
  out.endColumn = toPython(j["end_column"]);
  out.notes = toPython(j["notes"]);
  return out;
}

// The exception types, created once per interpreter and never released: a
// py::object here would be released after the interpreter is finalised.
PyObject* gError = nullptr;
PyObject* gStoreError = nullptr;

[[noreturn]] void raise(PyObject* typeObject, const std::string& message, const py::object& diagnostic,
                        const py::list& all) {
  py::object type = py::reinterpret_borrow<py::object>(typeObject);
  py::object e = type(message);
  e.attr("code") = diagnostic.is_none() ? py::object(py::none()) : py::object(diagnostic.attr("code"));
  for (const char* k : {"file", "line", "column"}) e.attr(k) = diagnostic.is_none() ? py::object(py::none()) : py::object(diagnostic.attr(k));
  e.attr("diagnostics") = all;
  PyErr_SetObject(type.ptr(), e.ptr());
  throw py::error_already_set();
}

}  // namespace

py::object toPython(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return py::none();
    case nlohmann::ordered_json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return py::int_(j.get<long long>());
    case nlohmann::ordered_json::value_t::number_unsigned: return py::int_(j.get<unsigned long long>());
    case nlohmann::ordered_json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      py::list l;
      for (const auto& x : j) l.append(toPython(x));
      return std::move(l);
    }
    case nlohmann::ordered_json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = toPython(v);
      return std::move(d);
    }
    case nlohmann::ordered_json::value_t::binary:
    case nlohmann::ordered_json::value_t::discarded: break;
  }
  return py::none();
}

py::list diagnosticList(const base::Diagnostics& diags, const base::SourceMap& sources) {
  py::list out;
  for (const auto& d : diags.all()) out.append(py::cast(diagnosticOf(d, sources)));
  return out;
}

void raiseDiagnostics(const base::Diagnostics& diags, const base::SourceMap& sources, const std::string& fallback) {
  py::gil_scoped_acquire gil;
  py::list all = diagnosticList(diags, sources);
  for (const auto& d : all)
    if (d.attr("severity").cast<std::string>() == "error")
      raise(gError, d.attr("code").cast<std::string>() + ": " + d.attr("message").cast<std::string>(), py::reinterpret_borrow<py::object>(d), all);
  raise(gError, fallback, py::none(), all);
}

void raiseError(const std::string& message) {
  py::gil_scoped_acquire gil;
  raise(gError, message, py::none(), py::list());
}

void raiseStoreError(const std::string& message) {
  py::gil_scoped_acquire gil;
  raise(gStoreError, message, py::none(), py::list());
}

void registerErrors(py::module_& m) {
  gError = PyErr_NewExceptionWithDoc(
      "ipu._ipu.IpuError",
      "A script, plan or store error: `code`, `file`, `line` and `column` of the first error "
      "diagnostic (None when there is none), every diagnostic under `diagnostics`.",
      PyExc_Exception, nullptr);
  gStoreError = PyErr_NewExceptionWithDoc(
      "ipu._ipu.StoreError", "The run store failed or refused (a locked file, a server gone away, an unknown run).",
      gError, nullptr);
  if (gError == nullptr || gStoreError == nullptr) throw py::error_already_set();
  m.attr("IpuError") = py::reinterpret_borrow<py::object>(gError);
  m.attr("StoreError") = py::reinterpret_borrow<py::object>(gStoreError);

  py::class_<Diagnostic>(m, "Diagnostic", "A diagnostic of a script (docs/diagnostics.md).")
      .def_readonly("code", &Diagnostic::code)
      .def_readonly("severity", &Diagnostic::severity)
      .def_readonly("message", &Diagnostic::message)
      .def_readonly("help", &Diagnostic::help)
      .def_readonly("file", &Diagnostic::file)
      .def_readonly("line", &Diagnostic::line)
      .def_readonly("column", &Diagnostic::column)
      .def_readonly("end_line", &Diagnostic::endLine)
      .def_readonly("end_column", &Diagnostic::endColumn)
      .def_readonly("notes", &Diagnostic::notes)
      .def_readonly("rendered", &Diagnostic::rendered)
      .def("__str__", [](const Diagnostic& d) { return d.rendered; })
      .def("__repr__", [](const Diagnostic& d) {
        std::string where = d.file.is_none() ? std::string("?")
                                             : py::str(d.file).cast<std::string>() + ":" + py::str(d.line).cast<std::string>() + ":" +
                                                   py::str(d.column).cast<std::string>();
        return "<Diagnostic " + d.severity + "[" + d.code + "] " + where + ": " + d.message + ">";
      });
}

}  // namespace ipu::python

PYBIND11_MODULE(_ipu, m) {
  using namespace ipu::python;
  m.doc() = "ipu: plan, price and track trainings of .ipu scripts (docs/python.md)";
  registerErrors(m);
  registerScript(m);
  registerStore(m);
  registerMeasuredRun(m);
  m.def(
      "fmt",
      [](const std::string& text, const std::string& name) {
        // `ipu fmt`'s formatter: the text only when it parses back to the same program.
        ipu::base::SourceMap sources;
        ipu::base::Diagnostics diags;
        ipu::base::FileId id = sources.add(name, text);
        ipu::syntax::Formatted f = ipu::syntax::formatSource(sources, id, diags);
        switch (f.outcome) {
          case ipu::syntax::Formatted::Outcome::Formatted: return f.text;
          case ipu::syntax::Formatted::Outcome::SyntaxErrors: raiseDiagnostics(diags, sources, "the script does not parse");
          case ipu::syntax::Formatted::Outcome::TooLarge: raiseError("the formatted text would be too large");
          case ipu::syntax::Formatted::Outcome::WouldChangeMeaning:
            raiseError("the formatter would change what the script means (a bug of `ipu fmt`); left as it is");
        }
        raiseError("unknown formatting outcome");
      },
      py::arg("text"), py::arg("name") = "<text>",
      "The script text in the canonical style, as `ipu fmt` writes it.");
}
