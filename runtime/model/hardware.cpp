#include "runtime/model/hardware.h"

// The hardware model is data; this translation unit exists so the library has
// an object file and a home for future helpers (topology queries).
namespace ipu::hw {}
