// Shared by the files of the Python binding (docs/python.md): JSON documents
// as Python objects, and the engine's failures as Python exceptions.
#pragma once
#include <pybind11/pybind11.h>
#include <mutex>
#include <string>
#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/store/run_store.h"
#include "runtime/ir/json.h"

namespace ipu::python {

namespace py = pybind11;

// A JSON document as dicts, lists, str, int, float, bool and None (numbers
// keep their exact values: no text in between).
py::object toPython(const nlohmann::ordered_json& j);

// The diagnostics as a list of ipu.Diagnostic (code, severity, message,
// help, file, line, column, end_line, end_column, notes, rendered).
py::list diagnosticList(const base::Diagnostics& diags, const base::SourceMap& sources);

// Raises ipu.IpuError for the first error among `diags` (its code, message
// and location as attributes, every diagnostic under `diagnostics`), or with
// `fallback` as its message when there is none.
[[noreturn]] void raiseDiagnostics(const base::Diagnostics& diags, const base::SourceMap& sources,
                                   const std::string& fallback);
// Raises ipu.IpuError without a diagnostic (code and location None).
[[noreturn]] void raiseError(const std::string& message);
// Raises ipu.StoreError (a subclass of IpuError): the store failed or refused.
[[noreturn]] void raiseStoreError(const std::string& message);

// A store call made without the GIL, under `mutex` (the object's connection
// is not shared between threads); its failures raised as ipu.StoreError.
// The GIL is released first, then the lock taken: a thread waiting for the
// lock must not hold the GIL the holder needs to return.
template <typename F>
void storeCall(std::mutex& mutex, F&& f) {
  try {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mutex);
    f();
  } catch (const store::StoreError& e) {
    raiseStoreError(e.what());
  }
}

void registerErrors(py::module_& m);
void registerScript(py::module_& m);
void registerStore(py::module_& m);
void registerMeasuredRun(py::module_& m);

}  // namespace ipu::python
