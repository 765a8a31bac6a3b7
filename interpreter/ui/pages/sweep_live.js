// A sweep's page made live: the report is drawn by the server, so when the
// sweep changes (/api/sweeps/NAME, asked every poll, differs from the
// document the page carries) the page is loaded again, at the same scroll
// position. Heartbeats alone do not count as a change.
"use strict";
(function() {
const box = document.getElementById("ui-sweep");
const name = box.dataset.sweep;
const key = "ipu-ui-sweep:" + name;
const withoutHeartbeats = text => JSON.stringify(JSON.parse(text), (k, v) => k === "heartbeat_at" ? undefined : v);
const carried = withoutHeartbeats(document.getElementById("ipu-sweep-data").textContent);
const saved = JSON.parse(sessionStorage.getItem(key) || "null");
if (saved) {
  window.scrollTo(0, saved.y);
  document.body.dataset.reloads = String(saved.reloads);
}
ui.every(Number(box.dataset.pollMs) || 2000, async () => {
  const r = await ui.get("/api/sweeps/" + encodeURIComponent(name));
  if (!r.ok) return;
  if (withoutHeartbeats(r.text) === carried) return;
  sessionStorage.setItem(key, JSON.stringify({ y: window.scrollY, reloads: (saved ? saved.reloads : 0) + 1 }));
  location.reload();
});
})();
