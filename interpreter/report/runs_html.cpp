#include "interpreter/report/runs_html.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "interpreter/report/html_text.h"
#include "interpreter/store/filter.h"

namespace ipu::report {

// Generated from third_party/uplot by cmake/EmbedFiles.cmake.
const std::string& uplotScript();
const std::string& uplotStyle();
const std::string& uplotLicense();

namespace {

struct Curve {
  std::vector<double> steps, values;  // values: NaN where not finite
};

Curve thin(const std::vector<store::MetricPoint>& points) {
  Curve c;
  const std::size_t n = points.size();
  if (n <= kMaxPointsPerCurve) {
    for (const auto& p : points) {
      c.steps.push_back(static_cast<double>(p.step));
      c.values.push_back(p.value);
    }
    return c;
  }
  const std::size_t bucket = (n + kMaxPointsPerCurve - 1) / kMaxPointsPerCurve;
  for (std::size_t i = 0; i < n; i += bucket) {
    double steps = 0, sum = 0;
    std::size_t count = 0, finite = 0;
    for (std::size_t j = i; j < std::min(n, i + bucket); ++j, ++count) {
      steps += static_cast<double>(points[j].step);
      if (std::isfinite(points[j].value)) {
        sum += points[j].value;
        ++finite;
      }
    }
    c.steps.push_back(steps / static_cast<double>(count));
    c.values.push_back(finite > 0 ? sum / static_cast<double>(finite) : std::nan(""));
  }
  return c;
}

bool hasFinite(const std::vector<store::MetricPoint>& points) {
  return std::any_of(points.begin(), points.end(), [](const store::MetricPoint& p) { return std::isfinite(p.value); });
}

nlohmann::json numberOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Metric keys in the order a reader looks for them: loss first, held-out
// evaluations next, then the rest by name.
std::vector<std::string> orderedKeys(const std::vector<ReportRun>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs)
    for (const auto& [k, pts] : r.history)
      if (hasFinite(pts)) keys.insert(k);
  std::vector<std::string> out(keys.begin(), keys.end());
  auto rank = [](const std::string& k) { return k == "loss" ? 0 : k.rfind("eval.", 0) == 0 ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return out;
}

const char* kPageScript = R"js(
"use strict";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
function color(i) { return i < PALETTE.length ? PALETTE[i] : "hsl(" + ((i * 137.5) % 360) + ",60%,42%)"; }
function fmt(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v);
  return (a !== 0 && (a < 1e-3 || a >= 1e6)) ? v.toExponential(3) : String(+v.toPrecision(5));
}
// Axis ticks: short, with SI prefixes for large numbers (8.02M, not 8.021e+6).
function tick(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return +(v / 1e3).toPrecision(3) + "k";
  return fmt(v);
}
const SVGNS = "http://www.w3.org/2000/svg";
function svgEl(name, attrs, parent) {
  const e = document.createElementNS(SVGNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function titled(e, text) { const t = svgEl("title", {}, e); t.textContent = text; return e; }

// Draws the whole page from D, the document runsReportData writes. Called
// once, and again by a live page (`ipu ui`) whenever its document changed.
function render(D) {
for (const id of ["charts", "params", "parallel-metric", "scatter-x", "scatter-y"]) {
  const e = document.getElementById(id);
  while (e.firstChild) e.removeChild(e.firstChild);
}
document.getElementById("run-count").textContent = D.runs.length + " run" + (D.runs.length === 1 ? "" : "s");
// Metric curves over steps, one chart per metric, runs overlaid.
let curves = 0;
const chartsDiv = document.getElementById("charts");
// Two charts side by side on a wide window, one on a narrow one.
const width = Math.max(360, Math.min(560, ((chartsDiv.clientWidth || 1000) - 40) / 2));
for (const c of D.charts) {
  const box = document.createElement("div");
  box.className = "chart";
  chartsDiv.appendChild(box);
  const h = document.createElement("h3");
  h.textContent = c.key;
  box.appendChild(h);
  const data = [c.steps].concat(c.series.map(s => s.values));
  const opts = {
    width: width, height: 220,
    scales: { x: { time: false } },
    series: [{ label: "step", value: (u, v) => v === null ? "-" : fmt(v) }].concat(c.series.map(s => ({
      label: D.runs[s.run].label, stroke: color(s.run), width: 1.5, spanGaps: true,
      value: (u, v) => fmt(v) }))),
    axes: [{ label: "step", values: (u, vals) => vals.map(tick) }, { size: 64, values: (u, vals) => vals.map(tick) }],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
  };
  new uPlot(opts, data, box);
  box.dataset.curves = String(c.series.length);
  curves += c.series.length;
}
if (D.charts.length === 0) chartsDiv.textContent = "No metric was recorded for these runs.";
document.body.dataset.curves = String(curves);

// The parameter table.
(function table() {
  const t = document.getElementById("params");
  const head = t.createTHead().insertRow();
  const cols = ["run", "kind", "status"].concat(D.tableParams, D.tableMetrics);
  cols.forEach((c, i) => { const th = document.createElement("th"); th.textContent = c; if (i >= 3 + D.tableParams.length) th.className = "metric"; head.appendChild(th); });
  const body = t.createTBody();
  D.runs.forEach((r, i) => {
    const row = body.insertRow();
    const name = row.insertCell();
    const sw = document.createElement("span"); sw.className = "swatch"; sw.style.background = color(i);
    name.appendChild(sw); name.appendChild(document.createTextNode(r.label));
    row.insertCell().textContent = r.kind;
    const st = row.insertCell(); st.textContent = r.status; st.className = "status-" + r.status;
    D.tableParams.forEach(p => { row.insertCell().textContent = r.params[p] === undefined ? "-" : r.params[p]; });
    D.tableMetrics.forEach(m => { const c = row.insertCell(); c.textContent = fmt(r.metrics[m]); c.className = "num"; });
  });
})();

// Many runs: parallel coordinates and a scatter, with the metric chosen in the page.
const numericParams = D.tableParams.filter(p => D.runs.every(r => r.params[p] === undefined || !Number.isNaN(Number(r.params[p]))) &&
                                                D.runs.some(r => r.params[p] !== undefined));
const allNumericParams = D.numericParams;
const metricKeys = D.tableMetrics;
function fillSelect(sel, options, chosen) {
  options.forEach(o => { const op = document.createElement("option"); op.value = o; op.textContent = o; if (o === chosen) op.selected = true; sel.appendChild(op); });
}
function extent(values) {
  const v = values.filter(x => x !== null && x !== undefined && !Number.isNaN(x));
  if (v.length === 0) return [0, 1];
  let lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
  if (lo === hi) { lo -= 0.5 * (Math.abs(lo) || 1); hi += 0.5 * (Math.abs(hi) || 1); }
  return [lo, hi];
}
function paramValue(r, p) { return r.params[p] === undefined ? null : Number(r.params[p]); }

function drawParallel() {
  const svg = document.getElementById("parallel");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const metric = document.getElementById("parallel-metric").value;
  const axes = numericParams.slice(0, 10).map(p => ({ name: p, get: r => paramValue(r, p) }));
  if (metric) axes.push({ name: metric, get: r => (r.metrics[metric] === undefined ? null : r.metrics[metric]) });
  const W = 1000, H = 340, top = 40, bottom = 30, left = 60, right = 60;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  if (axes.length < 2) { titled(svgEl("text", { x: 20, y: 30 }, svg), "").textContent = "Fewer than two numeric axes differ among these runs."; return; }
  const xs = axes.map((a, i) => left + i * (W - left - right) / (axes.length - 1));
  const ext = axes.map(a => extent(D.runs.map(a.get)));
  const y = (i, v) => top + (1 - (v - ext[i][0]) / (ext[i][1] - ext[i][0])) * (H - top - bottom);
  const mExt = metric ? extent(D.runs.map(r => r.metrics[metric])) : [0, 1];
  D.runs.forEach((r, ri) => {
    let d = "", pen = false;
    axes.forEach((a, i) => {
      const v = a.get(r);
      if (v === null || Number.isNaN(v)) { pen = false; return; }
      d += (pen ? "L" : "M") + xs[i].toFixed(1) + "," + y(i, v).toFixed(1);
      pen = true;
    });
    if (!d) return;
    const mv = metric ? r.metrics[metric] : undefined;
    const shade = (mv === undefined || mv === null) ? "#999" : "hsl(" + (240 - 240 * (mv - mExt[0]) / (mExt[1] - mExt[0])).toFixed(0) + ",70%,45%)";
    const path = svgEl("path", { d: d, fill: "none", stroke: shade, class: "pc-line" }, svg);
    titled(path, r.label + "\n" + axes.map(a => a.name + " = " + fmt(a.get(r))).join("\n"));
  });
  axes.forEach((a, i) => {
    svgEl("line", { x1: xs[i], x2: xs[i], y1: top, y2: H - bottom, class: "pc-axis" }, svg);
    const anchor = i === 0 ? "start" : i === axes.length - 1 ? "end" : "middle";
    const label = svgEl("text", { x: xs[i], y: top - 22, "text-anchor": anchor, class: "pc-label" }, svg);
    label.textContent = a.name;
    const hi = svgEl("text", { x: xs[i] + 4, y: top - 6, class: "pc-tick" }, svg); hi.textContent = fmt(ext[i][1]);
    const lo = svgEl("text", { x: xs[i] + 4, y: H - bottom + 16, class: "pc-tick" }, svg); lo.textContent = fmt(ext[i][0]);
  });
}

function drawScatter() {
  const svg = document.getElementById("scatter");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const p = document.getElementById("scatter-x").value, m = document.getElementById("scatter-y").value;
  const W = 700, H = 400, left = 80, right = 20, top = 20, bottom = 50;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  // A parameter with a value that is not a number (optimizer.kind) is
  // categorical: its values, sorted, stand at equal distances.
  const raw = D.runs.map(r => r.params[p]).filter(v => v !== undefined);
  const categories = raw.some(v => Number.isNaN(Number(v))) ? Array.from(new Set(raw)).sort() : null;
  const xOf = r => r.params[p] === undefined ? null : categories ? categories.indexOf(r.params[p]) : Number(r.params[p]);
  const pts = D.runs.map((r, i) => ({ r: r, i: i, x: xOf(r), y: r.metrics[m] }))
                    .filter(q => q.x !== null && !Number.isNaN(q.x) && q.y !== undefined && q.y !== null);
  const pad = e => [e[0] - 0.05 * (e[1] - e[0]), e[1] + 0.05 * (e[1] - e[0])];  // points off the frame
  const ex = categories ? [-0.5, categories.length - 0.5] : pad(extent(pts.map(q => q.x)));
  const ey = pad(extent(pts.map(q => q.y)));
  const X = v => left + (v - ex[0]) / (ex[1] - ex[0]) * (W - left - right);
  const Y = v => top + (1 - (v - ey[0]) / (ey[1] - ey[0])) * (H - top - bottom);
  svgEl("rect", { x: left, y: top, width: W - left - right, height: H - top - bottom, class: "sc-frame" }, svg);
  for (let k = 0; k <= 4; ++k) {
    const vx = ex[0] + k * (ex[1] - ex[0]) / 4, vy = ey[0] + k * (ey[1] - ey[0]) / 4;
    if (!categories) {
      const tx = svgEl("text", { x: X(vx), y: H - bottom + 18, "text-anchor": "middle", class: "pc-tick" }, svg);
      tx.textContent = fmt(vx);
    }
    const ty = svgEl("text", { x: left - 6, y: Y(vy) + 4, "text-anchor": "end", class: "pc-tick" }, svg); ty.textContent = fmt(vy);
  }
  if (categories) categories.forEach((c, k) => {
    const tx = svgEl("text", { x: X(k), y: H - bottom + 18, "text-anchor": "middle", class: "pc-tick" }, svg);
    tx.textContent = c;
  });
  const xl = svgEl("text", { x: (left + W - right) / 2, y: H - 8, "text-anchor": "middle", class: "pc-label" }, svg); xl.textContent = p;
  const yl = svgEl("text", { x: 14, y: (top + H - bottom) / 2, "text-anchor": "middle", class: "pc-label",
                             transform: "rotate(-90 14 " + (top + H - bottom) / 2 + ")" }, svg); yl.textContent = m;
  pts.forEach(q => {
    const c = svgEl("circle", { cx: X(q.x).toFixed(1), cy: Y(q.y).toFixed(1), r: 5, fill: color(q.i), class: "sc-point" }, svg);
    titled(c, q.r.label + "\n" + p + " = " + (categories ? categories[q.x] : fmt(q.x)) + "\n" + m + " = " + fmt(q.y));
  });
  svg.dataset.points = String(pts.length);
}

if (D.runs.length >= 3 && metricKeys.length > 0 && D.scatterParams.length > 0) {
  document.getElementById("many").hidden = false;
  const pm = document.getElementById("parallel-metric");
  fillSelect(pm, metricKeys, metricKeys[0]);
  pm.onchange = drawParallel;
  const sx = document.getElementById("scatter-x"), sy = document.getElementById("scatter-y");
  fillSelect(sx, D.scatterParams, numericParams.length ? numericParams[0] : allNumericParams.length ? allNumericParams[0] : D.scatterParams[0]);
  fillSelect(sy, metricKeys, metricKeys[0]);
  sx.onchange = drawScatter;
  sy.onchange = drawScatter;
  drawParallel();
  drawScatter();
} else {
  document.getElementById("many").hidden = true;
  document.getElementById("few").hidden = false;
}
document.body.dataset.rendered = "yes";
console.info("ipu report rendered: " + D.runs.length + " runs, " + curves + " curves");
}

const page = JSON.parse(document.getElementById("ipu-page").textContent);
let shown = document.getElementById("ipu-data").textContent;
render(JSON.parse(shown));
// A live page asks its server for the document again and redraws when it
// changed; a failed request is retried at the next tick, never fatal.
if (page.live) {
  let busy = false;
  setInterval(function() {
    if (busy) return;
    busy = true;
    fetch(page.live, { cache: "no-store" }).then(r => r.ok ? r.text() : Promise.reject(r.status)).then(text => {
      if (text !== shown) {
        shown = text;
        render(JSON.parse(text));
        document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
      }
    }).catch(() => {}).finally(() => { busy = false; });
  }, page.pollMs);
}
)js";

const char* kPageStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 20px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; } h3 { font-size: 14px; margin: 10px 0 2px; }
.meta { color: #666; }
.chart { display: inline-block; vertical-align: top; margin: 0 16px 18px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; white-space: nowrap; }
th.metric, td.num { text-align: right; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
.status-finished { color: #2a7d2a; } .status-failed, .status-killed { color: #b22; } .status-running { color: #1f5fbf; }
.pc-line { stroke-width: 1.6; opacity: 0.75; } .pc-line:hover { stroke-width: 4; opacity: 1; }
.pc-axis { stroke: #444; stroke-width: 1; } .pc-label { font-size: 12px; font-weight: 600; } .pc-tick { font-size: 11px; fill: #555; }
.sc-frame { fill: none; stroke: #bbb; } .sc-point { stroke: #fff; stroke-width: 1; } .sc-point:hover { r: 8; }
svg { max-width: 100%; height: auto; }
select { margin: 0 12px 0 4px; }
)css";

}  // namespace

std::size_t curveCount(const std::vector<ReportRun>& runs) {
  std::size_t n = 0;
  for (const auto& r : runs)
    for (const auto& [k, pts] : r.history)
      if (hasFinite(pts)) ++n;
  return n;
}

nlohmann::json runsReportData(const std::vector<ReportRun>& runs) {
  nlohmann::json data;
  // Runs.
  std::vector<store::RunRecord> records;
  for (const auto& r : runs) records.push_back(r.record);
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, std::size_t> present;
  std::set<std::string> numeric;
  for (const auto& r : records)
    for (const auto& [k, v] : r.parameters) {
      values[k].insert(v);
      ++present[k];
    }
  std::vector<std::string> tableParams, numericParams, scatterParams;
  for (const auto& [k, vs] : values) {
    bool allNumbers = std::all_of(vs.begin(), vs.end(), [](const std::string& s) {
      char* end = nullptr;
      std::strtod(s.c_str(), &end);
      return !s.empty() && *end == '\0';
    });
    if (k.rfind("phases.", 0) == 0 && records.size() > 1 && vs.size() <= 1) continue;
    if (vs.size() > 1 || (present[k] != records.size() && records.size() > 1)) tableParams.push_back(k);
    if (allNumbers && vs.size() > 1) numericParams.push_back(k);
    if (vs.size() > 1 && (k.rfind("phases.", 0) != 0 || allNumbers)) scatterParams.push_back(k);
  }
  // Keep the table readable: per-phase values only when no plain one differs.
  std::vector<std::string> plain;
  for (const auto& k : tableParams)
    if (k.rfind("phases.", 0) != 0) plain.push_back(k);
  if (!plain.empty()) tableParams = plain;
  if (records.size() == 1) tableParams.clear();
  std::set<std::string> metricSet;
  for (const auto& r : records)
    for (const auto& [k, s] : r.metrics)
      if (std::isfinite(s.last)) metricSet.insert(k);
  std::vector<std::string> tableMetrics(metricSet.begin(), metricSet.end());
  auto rank = [](const std::string& k) { return k == "loss" ? 0 : k.rfind("eval.", 0) == 0 ? 1 : 2; };
  std::stable_sort(tableMetrics.begin(), tableMetrics.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });

  data["runs"] = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json j;
    j["id"] = r.id;
    j["label"] = std::to_string(r.id) + " " + r.name;
    j["kind"] = store::name(r.kind);
    j["status"] = store::name(r.status);
    nlohmann::json params = nlohmann::json::object();
    for (const auto& k : tableParams)
      if (r.parameters.count(k)) params[k] = r.parameters.at(k);
    for (const auto& k : scatterParams)
      if (r.parameters.count(k)) params[k] = r.parameters.at(k);
    j["params"] = params;
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, s] : r.metrics)
      if (std::isfinite(s.last)) metrics[k] = s.last;
    j["metrics"] = metrics;
    data["runs"].push_back(j);
  }
  data["tableParams"] = tableParams;
  data["numericParams"] = numericParams;
  data["scatterParams"] = scatterParams;
  data["tableMetrics"] = tableMetrics;

  // One chart per metric: the union of the runs' (thinned) steps on x, each
  // run's values aligned to it (null where the run has no point).
  data["charts"] = nlohmann::json::array();
  for (const auto& key : orderedKeys(runs)) {
    std::vector<std::pair<std::size_t, Curve>> curves;
    std::set<double> steps;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].history.find(key);
      if (it == runs[i].history.end() || !hasFinite(it->second)) continue;
      Curve c = thin(it->second);
      steps.insert(c.steps.begin(), c.steps.end());
      curves.emplace_back(i, std::move(c));
    }
    std::vector<double> xs(steps.begin(), steps.end());
    nlohmann::json chart;
    chart["key"] = key;
    chart["steps"] = xs;
    chart["series"] = nlohmann::json::array();
    for (const auto& [run, c] : curves) {
      nlohmann::json ys = nlohmann::json::array();
      std::size_t at = 0;
      for (double x : xs) {
        while (at < c.steps.size() && c.steps[at] < x) ++at;
        ys.push_back(at < c.steps.size() && c.steps[at] == x ? numberOrNull(c.values[at]) : nlohmann::json(nullptr));
      }
      chart["series"].push_back({{"run", run}, {"values", ys}});
    }
    data["charts"].push_back(chart);
  }
  return data;
}

std::string runsReportHtml(const std::vector<ReportRun>& runs, const std::string& title, const std::string& source,
                           const PageOptions& options) {
  const nlohmann::json data = runsReportData(runs);
  nlohmann::json page = {{"live", options.liveUrl.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.liveUrl)},
                         {"pollMs", options.pollMilliseconds}};
  std::string html;
  html.reserve(200000);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escapeHtml(title) + "</title>\n";
  // First, so that any later error is counted (the report test reads these).
  html += "<script>window.ipuErrors=[];function ipuError(m){window.ipuErrors.push(String(m));"
          "document.documentElement.setAttribute('data-errors',String(window.ipuErrors.length));}"
          "window.addEventListener('error',function(e){ipuError(e.message);});"
          "(function(){var ce=console.error;console.error=function(){ipuError(Array.prototype.join.call(arguments,' '));"
          "return ce.apply(console,arguments);};})();</script>\n";
  html += "<style>\n" + uplotStyle() + "\n" + kPageStyle + "</style>\n";
  // uPlot's MIT licence asks for its notice in every copy: here, in a comment.
  std::string notice = uplotLicense();
  for (std::size_t at = notice.find("--"); at != std::string::npos; at = notice.find("--")) notice.replace(at, 2, "- -");
  html += "<!-- The charts are drawn by uPlot 1.6.32 (https://github.com/leeoniya/uPlot), embedded below:\n" + notice + "-->\n";
  html += "<script>\n" + uplotScript() + "\n</script>\n</head>\n<body>\n";
  html += "<h1>" + escapeHtml(title) + "</h1>\n<div class=\"meta\"><span id=\"run-count\"></span> from " + escapeHtml(source) + ", " + escapeHtml(store::formatTime(store::nowSeconds())) +
          ". Hover a chart for values; drag to zoom, double-click to reset; click a legend entry to hide a run.</div>\n";
  html += "<h2>Metrics over steps</h2>\n<div id=\"charts\"></div>\n";
  html += "<h2>Parameters</h2>\n<div style=\"overflow-x:auto\"><table id=\"params\"></table></div>\n";
  html += "<div id=\"many\" hidden>\n<h2>Parallel coordinates</h2>\n<label>colour and last axis: <select id=\"parallel-metric\"></select></label>\n"
          "<svg id=\"parallel\" xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\" height=\"340\"></svg>\n"
          "<h2>Metric against parameter</h2>\n<label>parameter <select id=\"scatter-x\"></select></label>"
          "<label>metric <select id=\"scatter-y\"></select></label>\n"
          "<svg id=\"scatter\" xmlns=\"http://www.w3.org/2000/svg\" width=\"700\" height=\"400\"></svg>\n</div>\n";
  html += "<p id=\"few\" class=\"meta\" hidden>Parallel coordinates and the metric-against-parameter scatter appear for three "
          "runs or more that differ in a parameter.</p>\n";
  html += "<script type=\"application/json\" id=\"ipu-data\">" + jsonForScript(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + "</script>\n";
  html += "<script type=\"application/json\" id=\"ipu-page\">" + jsonForScript(page.dump()) + "</script>\n";
  html += "<script>" + std::string(kPageScript) + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace ipu::report
