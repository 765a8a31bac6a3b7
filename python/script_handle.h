// The objects the binding's files share: a mapping value tied to a training
// phase of a script, and where a store is named.
#pragma once
#include <pybind11/pybind11.h>
#include <string>
#include "interpreter/plan/mapping_value.h"

namespace ipu::python {

// ipu.Mapping: a mapping value (plan/mapping_value.h) for the phase `phase`
// of the training `run` of the script at `script` ("" for the first).
struct Mapping {
  std::string script, run, phase;
  plan::MappingValue value;
  bool asWritten = true;  // not varied: the phase's own mapping
};

// Raises IpuError unless `m` is a mapping of the script at `path` (the same
// file, however the two paths are spelt): a mapping names its training and
// phase, which another script's need not have.
void requireScriptOf(const Mapping& m, const std::string& path);

// A store argument: a location (a path or a postgresql:// URI), an
// ipu.Store, or None for $IPU_STORE, else runs/ipu.db (as `ipu estimate` and
// `ipu run` record by default).
std::string storeLocation(const pybind11::handle& store);

}  // namespace ipu::python
