// A sweep's page made live: the report is drawn by the server, so when the
// sweep changes (/api/sweeps/NAME, asked every poll, differs from the
// document the page carries) the page is loaded again, at the same scroll
// position. A trial's progress alone (its `steps`, which grow with every
// point a training records) reloads it at most every 15 s, so a page of a
// running sweep stays still long enough to be read.
"use strict";
(function() {
const box = document.getElementById("ui-sweep");
const name = box.dataset.sweep;
const key = "ipu-ui-sweep:" + name;
const loadedAt = Date.now();
const withoutSteps = text => JSON.stringify(JSON.parse(text), (k, v) => k === "steps" ? undefined : v);
const carriedText = document.getElementById("ipu-sweep-data").textContent;
const carried = JSON.stringify(JSON.parse(carriedText)), carriedWithoutSteps = withoutSteps(carriedText);
const saved = JSON.parse(sessionStorage.getItem(key) || "null");
if (saved) {
  window.scrollTo(0, saved.y);
  document.body.dataset.reloads = String(saved.reloads);
}
ui.every(Number(box.dataset.pollMs) || 2000, async () => {
  const r = await ui.get("/api/sweeps/" + encodeURIComponent(name));
  if (!r.ok) return;
  if (withoutSteps(r.text) === carriedWithoutSteps &&
      (JSON.stringify(JSON.parse(r.text)) === carried || Date.now() - loadedAt < 15000)) return;
  sessionStorage.setItem(key, JSON.stringify({ y: window.scrollY, reloads: (saved ? saved.reloads : 0) + 1 }));
  location.reload();
});
})();
