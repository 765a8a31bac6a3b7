// First on every dashboard page: counts uncaught errors and console.error
// calls (as the report pages do), so a test and a user can see the page
// went wrong: <html data-errors="N">, window.ipuErrors.
"use strict";
window.ipuErrors = window.ipuErrors || [];
function ipuError(m) {
  window.ipuErrors.push(String(m));
  document.documentElement.setAttribute("data-errors", String(window.ipuErrors.length));
}
window.addEventListener("error", function(e) { ipuError(e.message); });
window.addEventListener("unhandledrejection", function(e) { ipuError("unhandled rejection: " + e.reason); });
(function() {
  const ce = console.error;
  console.error = function() { ipuError(Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); };
})();
