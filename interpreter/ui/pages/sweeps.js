// The list of sweeps (GET /sweeps), from /api/sweeps, asked again every poll.
"use strict";
(function() {
let shown = null;
async function load() {
  const r = await ui.get("/api/sweeps");
  const box = document.getElementById("load-error");
  box.hidden = r.ok;
  if (!r.ok) { box.textContent = r.json.error; return; }
  if (r.text === shown) return;
  shown = r.text;
  const rows = r.json.sweeps.map(s => {
    const c = s.counts;
    return ui.el("tr", { "data-name": s.name }, [
      ui.el("td", {}, [ui.el("a", { href: "/sweeps/" + encodeURIComponent(s.name), text: s.name })]),
      ui.el("td", { text: s.state }),
      ui.el("td", { text: s.method }),
      ui.el("td", { text: s.training }),
      ui.el("td", { text: s.metric.name + " (" + s.metric.goal + ")" }),
      ui.el("td", { class: "num", text: String(s.total) }),
      ui.el("td", { class: "num", text: String((c.finished || 0) + (c.stopped || 0)) }),
      ui.el("td", { class: "num", text: String(c.running || 0) }),
      ui.el("td", { class: "num", text: String(c.queued || 0) }),
      ui.el("td", { class: "num", text: String((c.failed || 0) + (c.killed || 0)) }),
      ui.el("td", { class: "num", text: s.best ? ui.number(s.best.metric) + " (trial " + s.best.index + ")" : "-" }),
      ui.el("td", { text: ui.time(s.created_at) }),
    ]);
  });
  document.querySelector("#sweeps tbody").replaceChildren(...rows);
  document.getElementById("none").hidden = rows.length > 0;
  document.body.dataset.rows = String(rows.length);
  document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
}
ui.get("/api/config").then(r => {
  if (r.ok) document.getElementById("store").textContent = r.json.store;
  ui.every(r.ok ? r.json.poll_ms : 2000, load);
});
})();
