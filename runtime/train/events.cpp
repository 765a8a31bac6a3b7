#include "runtime/train/events.h"

namespace ipu::train {

const char* name(Source s) { return s == Source::Emulator ? "emulator" : "estimate"; }

}  // namespace ipu::train
