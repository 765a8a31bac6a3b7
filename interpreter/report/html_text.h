// Text inside the HTML reports (runs_html.h, sweep_html.h): every string
// that came from a user (a run or sweep name, a parameter value, a store's
// path) goes through one of these, so it is shown as text and never read as
// markup or script.
#pragma once

#include <string>

namespace ipu::report {

// For element content and double-quoted attribute values: & < > " escaped.
std::string escapeHtml(const std::string& text);

// A JSON document to put inside <script type="application/json">: <, > and &
// are written as \u003c, \u003e, \u0026 (they can occur only inside JSON
// strings, where the escapes mean the same), so no `</script>` or `<!--` in
// a value can end or change the element.
std::string jsonForScript(const std::string& json);

}  // namespace ipu::report
