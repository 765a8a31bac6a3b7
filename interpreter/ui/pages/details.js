// The dashboard's section of a run's page and of a comparison (below the
// report's curves): each run's status, tags and note, the parameters that
// differ, and predicted against measured (the newest estimate of the same
// plan), from /api/compare, asked again every poll.
"use strict";
(function() {
const section = document.getElementById("ui-details");
const ids = section.dataset.ids;
let shown = null;

function table(headers, rows) {
  return ui.el("table", { class: "ui-table" }, [
    ui.el("thead", {}, [ui.el("tr", {}, headers.map(h => ui.el("th", { text: h })))]),
    ui.el("tbody", {}, rows.map(r => ui.el("tr", {}, r.map(c => c instanceof Node ? ui.el("td", {}, [c]) : ui.el("td", { text: c }))))),
  ]);
}

function render(d) {
  const parts = [ui.el("h2", { text: d.runs.length === 1 ? "Run" : "Runs" }),
    table(["id", "name", "status", "started", "duration", "tags", "note"], d.runs.map(r => [
      ui.el("a", { href: "/runs/" + r.id, text: String(r.id) }), r.name,
      ui.el("span", { class: "status-" + r.status, text: r.status + (r.stop_reason ? " (" + r.stop_reason + ")" : "") }),
      ui.time(r.started_at),
      ui.duration((r.ended_at !== null ? r.ended_at : r.status === "running" ? Date.now() / 1000 : NaN) - r.started_at),
      ui.tags(r.tags), r.note || ""]))];
  if (d.runs.length > 1) {
    parts.push(ui.el("h2", { text: "Parameters that differ" }));
    parts.push(d.differing_parameters.length
      ? table(["parameter", ...d.runs.map(r => r.id + " " + r.name)],
              d.differing_parameters.map(p => [p.name, ...p.values.map(v => v === null ? "-" : v)]))
      : ui.el("p", { class: "meta", text: "None: every parameter is the same." }));
  }
  parts.push(ui.el("h2", { text: "Predicted against measured" }));
  if (!d.predicted_vs_measured.length)
    parts.push(ui.el("p", { class: "meta", text: "No estimate of the same plan in the store (ipu estimate FILE records one)." }));
  for (const p of d.predicted_vs_measured) {
    parts.push(ui.el("h3", { text: "run " + p.run + " against estimate " + p.estimate + " (plan " + p.plan_hash + ")" }));
    parts.push(table(["metric", "predicted", "measured (mean)", "ratio"],
                     p.metrics.map(m => [m.key, ui.number(m.predicted), ui.number(m.measured_mean), ui.number(m.ratio)])));
    parts.push(ui.el("p", { class: "meta", text: p.measured_by_training
      ? "Measured by the training that logged it, on its own hardware."
      : "The emulator's speed is this host's, not an IPU's: compare shapes, not absolute speed." }));
  }
  section.replaceChildren(...parts);
}

// Asked again until none of the runs is running (the report above stops then too).
const timer = ui.every(Number(section.dataset.pollMs) || 2000, async () => {
  const r = await ui.get("/api/compare?ids=" + encodeURIComponent(ids));
  if (!r.ok) {
    section.replaceChildren(ui.el("p", { class: "ui-error", text: r.json.error }));
    shown = null;
    return;
  }
  if (r.text === shown) return;
  shown = r.text;
  render(r.json);
  section.dataset.rendered = "yes";
  if (!r.json.runs.some(run => run.status === "running")) clearInterval(timer);
});
})();
