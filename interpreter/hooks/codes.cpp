#include "interpreter/hooks/codes.h"

namespace ipu::hooks {

const std::vector<base::CodeInfo>& hookCodes() {
  static const std::vector<base::CodeInfo> codes = {
      {code::kLuaSyntax, "a Lua hook that does not compile"},
      {code::kLuaRuntime, "a Lua error while a hook runs"},
      {code::kLuaInstructions, "a hook used its instruction or time budget (an endless loop?)"},
      {code::kLuaMemory, "a hook used its memory budget"},
      {code::kLuaForbidden, "a hook used something the sandbox does not allow"},
      {code::kMetricUnavailable, "a hook asked for a metric this kind of run does not have"},
      {code::kLuaFunction, "`lua NAME` names a function no hook defines, or several do"},
      {code::kLuaBadValue, "a Lua function returned a value of the wrong kind"},
  };
  return codes;
}

}  // namespace ipu::hooks
