// Errors of the emulator, as values. Nothing the emulator does throws across
// its API or prints: a failure is an Error with a stable code (IPU5xxx), a
// message, a help line and the place in the script it concerns (a layer, the
// mapping, a phase), which the caller renders as a diagnostic.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::emu {

namespace code {
inline constexpr const char* kPlanDoesNotFit = "IPU5001";       // the plan's verdict: an IPU overflows
inline constexpr const char* kUnsupportedLayer = "IPU5002";     // no kernel for a layer's op, or bad attributes
inline constexpr const char* kHostMemory = "IPU5003";           // the host cannot hold the emulation
inline constexpr const char* kDataset = "IPU5004";              // dataset missing, unreadable or unusable
inline constexpr const char* kCheckpoint = "IPU5005";           // checkpoint unreadable, missing or incompatible
inline constexpr const char* kUnsupportedModel = "IPU5006";     // the layer stack cannot be executed as a whole
inline constexpr const char* kIpuMemory = "IPU5007";            // a virtual IPU's buffers exceed its memory
inline constexpr const char* kMissingPolicy = "IPU5008";        // `lr: lua f` without the caller's function
inline constexpr const char* kIo = "IPU5009";                   // writing a file failed
inline constexpr const char* kDiverged = "IPU5010";             // a step's loss is not a finite number
inline constexpr const char* kImageFile = "IPU5011";            // an image dataset file is damaged or does not fit the model
inline constexpr const char* kInstances = "IPU5012";            // the replicas do not divide over the MPI instances
inline constexpr const char* kInternal = "IPU5099";             // a bug: an invariant broke
}  // namespace code

struct CodeTitle {
  const char* code;
  const char* title;
};
const std::vector<CodeTitle>& emulatorCodes();

struct Error {
  std::string code;
  std::string message;
  std::string help;
  ir::SourceRef where;
};

// A value or the Error that prevented it.
template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}          // NOLINT: implicit on purpose
  Expected(Error error) : v_(std::move(error)) {}      // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace ipu::emu
