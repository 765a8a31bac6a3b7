#include "interpreter/report/runs_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "interpreter/report/html_text.h"
#include "interpreter/report/parameter_names.h"
#include "interpreter/store/filter.h"

namespace ipu::report {

// Generated from third_party/uplot by cmake/EmbedFiles.cmake.
const std::string& uplotScript();
const std::string& uplotStyle();
const std::string& uplotLicense();

namespace {

bool hasFinite(const std::vector<store::MetricPoint>& points) {
  return std::any_of(points.begin(), points.end(), [](const store::MetricPoint& p) { return std::isfinite(p.value); });
}

// Six significant digits: more than a reader sees (the page shows five), and
// a third of the text of the seventeen a double prints with.
nlohmann::json rounded(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  // In doubles when the powers of ten involved are exact (up to 1e22): the
  // quotient or product of two exact values is the double nearest the
  // six-digit decimal, which prints as such. A report holds 400,000 values:
  // printing and parsing each would be a quarter of `ipu report`'s time.
  const int e = static_cast<int>(std::floor(std::log10(std::abs(v))));
  if (e >= -17 && e <= 5) {
    const double scale = std::pow(10.0, 5 - e);
    return std::round(v * scale) / scale;
  }
  if (e > 5 && e <= 27) {
    const double unit = std::pow(10.0, e - 5);
    return std::round(v / unit) * unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}

bool isPhaseKey(const std::string& k) { return k.rfind("phases.", 0) == 0; }

// Metric keys in the order a reader looks for them: loss first, held-out
// evaluations next, then the rest by name.
int keyRank(const std::string& k) { return k == "loss" ? 0 : k.rfind("eval.", 0) == 0 ? 1 : 2; }

std::vector<std::string> orderedKeys(const std::vector<ReportRun>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs)
    for (const auto& [k, pts] : r.history)
      if (hasFinite(pts)) keys.insert(k);
  std::vector<std::string> out(keys.begin(), keys.end());
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return keyRank(a) < keyRank(b); });
  return out;
}

// A metric whose every finite point, in every run, has one value (loss_scale
// with a static scale, skipped at 0): a flat chart says nothing a number does
// not. One point alone is a curve still to grow, not a constant.
struct ConstantMetric {
  double value = 0;
  std::size_t points = 0, runs = 0;
  bool constant = true;
};

std::map<std::string, ConstantMetric> constantMetrics(const std::vector<ReportRun>& runs) {
  std::map<std::string, ConstantMetric> seen;
  for (const auto& r : runs)
    for (const auto& [k, pts] : r.history) {
      if (!hasFinite(pts)) continue;
      ConstantMetric& c = seen[k];
      ++c.runs;
      for (const auto& p : pts) {
        if (!std::isfinite(p.value)) continue;
        if (c.points++ == 0) c.value = p.value;
        else if (p.value != c.value) c.constant = false;
      }
    }
  std::map<std::string, ConstantMetric> out;
  for (const auto& [k, c] : seen)
    if (c.constant && c.points >= 2) out.emplace(k, c);
  return out;
}

// One chart's x axis, shared by its curves: the steps the runs recorded, or,
// when they are more than `points`, buckets of equal width in steps (x: the
// mean of the steps in the bucket), so that curves stay aligned for group
// means however they were thinned.
struct ChartGrid {
  std::vector<double> xs;
  long long first = 0, width = 1;  // bucket b holds steps [first + b*width, first + (b+1)*width)
  std::map<long long, std::size_t> column;  // bucket -> index in xs
  bool bucketed = false;

  std::size_t at(long long step) const {
    return column.at(bucketed ? (step - first) / width : step);
  }
};

ChartGrid gridFor(const std::set<long long>& steps, std::size_t points) {
  ChartGrid g;
  if (steps.size() <= points) {
    for (long long s : steps) {
      g.column[s] = g.xs.size();
      g.xs.push_back(static_cast<double>(s));
    }
    return g;
  }
  g.bucketed = true;
  g.first = *steps.begin();
  const long long span = *steps.rbegin() - g.first + 1;
  g.width = (span + static_cast<long long>(points) - 1) / static_cast<long long>(points);
  std::map<long long, std::pair<double, std::size_t>> sums;
  for (long long s : steps) {
    auto& [sum, n] = sums[(s - g.first) / g.width];
    sum += static_cast<double>(s);
    ++n;
  }
  for (const auto& [b, sn] : sums) {
    g.column[b] = g.xs.size();
    g.xs.push_back(std::round(sn.first / static_cast<double>(sn.second) * 10) / 10);
  }
  return g;
}

// The parameters that differ among the runs, one per way of splitting them:
// of keys that split the runs alike (a phase's lr.base and lr.peak set
// together), the plainest is kept (not per phase, then the shortest).
std::vector<std::string> namingKeys(const std::vector<store::RunRecord>& records, const std::vector<std::string>& differing) {
  std::vector<std::string> order = differing;
  std::stable_sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    if (isPhaseKey(a) != isPhaseKey(b)) return !isPhaseKey(a);
    return a.size() < b.size();
  });
  std::set<std::vector<std::size_t>> splits;
  std::vector<std::string> kept;
  for (const auto& k : order) {
    std::map<std::string, std::size_t> ids;
    std::vector<std::size_t> split;
    for (const auto& r : records) {
      auto it = r.parameters.find(k);
      const std::string v = it == r.parameters.end() ? std::string("\x01") : it->second;
      split.push_back(ids.emplace(v, ids.size()).first->second);
    }
    if (splits.insert(split).second) kept.push_back(k);
  }
  return kept;
}

std::string shortValue(const std::string& v) {
  if (v.size() <= 24) return v;
  std::size_t cut = 23;
  while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return v.substr(0, cut) + "\xE2\x80\xA6";
}

// A name the user gave (`ipu run --name`), rather than the store's
// "<training>-<id>".
bool givenName(const store::RunRecord& r) {
  return !r.name.empty() && r.name != r.training + "-" + std::to_string(r.id);
}

std::string tagsText(const store::RunRecord& r) {
  std::vector<std::string> tags = r.tags;
  std::sort(tags.begin(), tags.end());
  std::string s;
  for (const auto& t : tags) s += (s.empty() ? "" : ", ") + t;
  return s;
}

constexpr std::size_t kLabelParams = 3;  // more would not fit a legend entry; the table has them all
const char* kTagsGroup = "#tags";        // no parameter path starts with '#'

const char* kPageScript = R"js(
"use strict";
// Colours come from a run's id alone, so a run keeps its colour when runs are
// added (a live page) and has it in every chart, the legend, the table, the
// parallel coordinates and the scatter. Hues a golden angle apart, three
// lightnesses in turn: runs with neighbouring ids never look alike, and past
// about 20 runs some colours come close, which the page says (grouping is the
// answer). Groups are coloured the same way by their rank.
function hueColour(k, alpha) {
  const h = (k * 137.508) % 360;
  let l = [44, 30, 57][k % 3];
  if (h > 40 && h < 200) l -= 9;  // yellows, greens and cyans look lighter than they are
  return "hsla(" + h.toFixed(1) + ",72%," + l + "%," + (alpha === undefined ? 1 : alpha) + ")";
}
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
  if (a !== 0 && a < 1e-3) return v.toExponential(1).replace(".0e", "e");  // 8e-4, 1.5e-4: short enough for the axis
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
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
function el(name, cls, text, parent) {
  const e = document.createElement(name);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function byId(id) { return document.getElementById(id); }
const naturally = (a, b) => a.localeCompare(b, undefined, { numeric: true });

// What the reader chose in the page: kept across redraws of a live page.
// group: undefined until chosen (the document's default applies), "" none.
const state = { group: undefined, smoothing: 0, hidden: new Set(), zoom: {}, parallelMetric: undefined,
                parallelColour: "run", scatterX: undefined, scatterY: undefined };
let current = null;     // the document drawn
let rendering = false;  // scale changes while drawing are not the reader's zoom
const charts = [];      // {key, plot, entities}: for tests and tools
window.ipuReport = { state: state, charts: charts, render: function(D) { render(D); } };

function chosenGroup(D) {
  const id = state.group === undefined ? D.defaultGroup : state.group;
  return D.groupBy.find(g => g.id === id) || null;
}
function groupValue(g, r) {
  if (g.id === "#tags") return r.tags.length ? "tags: " + r.tags.slice().sort().join(", ") : "no tag";
  return g.keys.map((k, i) => g.names[i] + "=" + (r.params[k] === undefined ? "-" : r.params[k])).join(", ");
}
// What is drawn: each run, or each group of runs (by the chosen parameter or tags).
function entitiesOf(D) {
  const g = chosenGroup(D);
  if (!g) {
    const list = D.runs.map((r, i) => ({ key: "r" + r.id, label: r.label, tone: r.id, colour: hueColour(r.id), runs: [i], run: r }));
    return { group: null, list: list, of: list };
  }
  const members = new Map();
  D.runs.forEach((r, i) => {
    const v = groupValue(g, r);
    if (!members.has(v)) members.set(v, []);
    members.get(v).push(i);
  });
  // Groups in the order of their values, numbers as numbers (0.005 before 0.01).
  const order = (a, b) => {
    const ra = D.runs[members.get(a)[0]], rb = D.runs[members.get(b)[0]];
    for (const k of g.keys) {
      const x = ra.params[k], y = rb.params[k];
      if (x === y) continue;
      if (x === undefined || y === undefined) return x === undefined ? 1 : -1;
      const nx = Number(x), ny = Number(y);
      return !Number.isNaN(nx) && !Number.isNaN(ny) ? nx - ny : naturally(x, y);
    }
    return naturally(a, b);
  };
  const list = Array.from(members.keys()).sort(order).map((v, k) => {
    const runs = members.get(v);
    return { key: "g" + v, label: v + " (" + runs.length + " run" + (runs.length === 1 ? "" : "s") + ")", tone: k + 1, colour: hueColour(k + 1), runs: runs };
  });
  const of = [];
  list.forEach(e => e.runs.forEach(i => { of[i] = e; }));
  return { group: g, list: list, of: of };
}

// TensorBoard's smoothing: an exponential moving average, debiased so that
// the first points are not pulled towards 0. Gaps stay gaps.
function smooth(values, w) {
  if (!w) return values;
  let last = 0, n = 0;
  return values.map(v => {
    if (v === null) return null;
    last = last * w + (1 - w) * v;
    n += 1;
    return last / (1 - Math.pow(w, n));
  });
}
function groupStats(rows, length) {
  const mean = [], lo = [], hi = [];
  for (let x = 0; x < length; ++x) {
    let sum = 0, n = 0, mn = Infinity, mx = -Infinity;
    for (const r of rows) {
      const v = r[x];
      if (v === null) continue;
      sum += v; n += 1;
      if (v < mn) mn = v;
      if (v > mx) mx = v;
    }
    mean.push(n ? sum / n : null); lo.push(n ? mn : null); hi.push(n ? mx : null);
  }
  return { mean: mean, lo: lo, hi: hi };
}

// The hover box of a chart: the step, and the curves nearest the pointer with
// their drawn (smoothed) value and, when smoothing, the raw one.
function showTip(u, tip, lines, smoothing) {
  const idx = u.cursor.idx;
  if (idx === null || idx === undefined || u.cursor.left < 0) { tip.hidden = true; return; }
  const y = u.posToVal(u.cursor.top, "y");
  const rows = lines.map(s => ({ s: s, v: u.data[s.index][idx], raw: s.raw[idx] })).filter(r => r.v !== null && r.v !== undefined);
  rows.sort((a, b) => Math.abs(a.v - y) - Math.abs(b.v - y));
  clear(tip);
  el("div", "tip-step", "step " + fmt(u.data[0][idx]), tip);
  rows.slice(0, 8).forEach(r => {
    const line = el("div", "tip-row", null, tip);
    el("span", "swatch", null, line).style.background = r.s.entity.colour;
    el("span", "tip-label", r.s.entity.label, line);
    let text = " " + fmt(smoothing ? r.v : r.raw);
    if (smoothing) text += " (raw " + fmt(r.raw) + ")";
    if (r.s.band) text += " [" + fmt(u.data[r.s.band[1]][idx]) + " to " + fmt(u.data[r.s.band[0]][idx]) + "]";
    el("span", "tip-value", text, line);
  });
  if (rows.length > 8) el("div", "tip-more", "and " + (rows.length - 8) + " more", tip);
  tip.hidden = rows.length === 0;
  const left = u.over.offsetLeft + u.cursor.left;
  tip.style.left = (left + 14 + tip.offsetWidth > u.root.offsetWidth ? Math.max(0, left - 14 - tip.offsetWidth) : left + 14) + "px";
  tip.style.top = (u.over.offsetTop + Math.max(0, u.cursor.top - 10)) + "px";
}

function drawControls(D, E) {
  const sel = clear(byId("group-by"));
  const chosen = E.group ? E.group.id : "";
  const options = [{ id: "", text: "none: every run" }].concat(D.groupBy.map(g => ({
    id: g.id, text: g.names.join(", ") + " (" + g.groups + " groups)" })));
  options.forEach(o => { const op = el("option", null, o.text, sel); op.value = o.id; if (o.id === chosen) op.selected = true; });
  sel.disabled = D.groupBy.length === 0;
  sel.onchange = () => { state.group = sel.value; state.hidden.clear(); render(current); };
  const sm = byId("smoothing");
  sm.value = String(state.smoothing);
  byId("smoothing-value").textContent = state.smoothing ? state.smoothing.toFixed(2) : "none";
  sm.oninput = () => { byId("smoothing-value").textContent = Number(sm.value) ? Number(sm.value).toFixed(2) : "none"; };
  sm.onchange = () => { state.smoothing = Number(sm.value); render(current); };
  const all = byId("show-all");
  all.hidden = state.hidden.size === 0;
  all.onclick = () => { state.hidden.clear(); render(current); };

  const note = byId("crowded");
  const shown = E.list.filter(e => !state.hidden.has(e.key)).length;
  note.hidden = true;
  if (E.group && state.group === undefined) {
    note.hidden = false;
    note.textContent = D.runs.length + " runs are more than colours can tell apart, so they are grouped by " + E.group.names.join(", ") +
        " (mean line, min-max band); choose \u201cnone\u201d above to draw every run.";
  } else if (!E.group && shown > D.distinguishable) {
    note.hidden = false;
    note.textContent = shown + " runs drawn one by one are more than colours can tell apart (about " + D.distinguishable + "): " +
        (D.groupBy.length ? "group them above (by " + D.groupBy.map(g => g.names.join(", ")).join("; or ") + ")"
                          : "hide some in the legend, or report fewer (ipu report --where)") + ".";
  }
}

function drawLegend(D, E) {
  const legend = clear(byId("legend"));
  E.list.forEach(e => {
    const b = el("button", "chip" + (state.hidden.has(e.key) ? " off" : ""), null, legend);
    b.type = "button";
    b.dataset.key = e.key;
    if (e.run) b.dataset.run = String(e.run.id);
    el("span", "swatch", null, b).style.background = e.colour;
    el("span", null, e.label, b);
    let title = e.label;
    if (e.run) {
      if (e.run.named) title += "\n" + e.run.name;
      if (e.run.tags.length) title += "\ntags: " + e.run.tags.join(", ");
      if (e.run.note) title += "\nnote: " + e.run.note;
    } else {
      title += "\n" + e.runs.map(i => D.runs[i].label).join("\n");
    }
    b.title = title + "\n(click to hide or show)";
    b.onclick = () => {
      if (state.hidden.has(e.key)) state.hidden.delete(e.key); else state.hidden.add(e.key);
      render(current);
    };
  });
}

function drawCharts(D, E) {
  const chartsDiv = clear(byId("charts"));
  charts.length = 0;
  let curves = 0, bands = 0;
  // As many charts side by side as fit, 420 px wide at least.
  const room = chartsDiv.clientWidth || 1000;
  const perRow = Math.max(1, Math.min(4, Math.floor(room / 420)));
  const width = Math.min(560, Math.floor(room / perRow) - 18);
  const visible = E.list.filter(e => !state.hidden.has(e.key));
  for (const c of D.charts) {
    const box = el("div", "chart", null, chartsDiv);
    box.dataset.key = c.key;
    el("h3", null, c.key, box);
    const byRun = new Map(c.series.map(s => [s.run, s.values]));
    const data = [c.steps], series = [{ label: "step" }], lines = [], bandList = [], drawn = [];
    for (const e of visible) {
      const rows = e.runs.filter(i => byRun.has(i)).map(i => byRun.get(i));
      if (rows.length === 0) continue;
      const grouped = E.group !== null;
      const stats = grouped ? groupStats(rows, c.steps.length) : null;
      const raw = grouped ? stats.mean : rows[0];
      const line = { entity: e, index: data.length, raw: raw, band: null };
      data.push(smooth(raw, state.smoothing));
      series.push({ label: e.label, stroke: e.colour, width: grouped ? 2 : 1.5, spanGaps: true });
      if (grouped && rows.length > 1) {
        line.band = [data.length, data.length + 1];
        data.push(smooth(stats.hi, state.smoothing), smooth(stats.lo, state.smoothing));
        const edge = { stroke: hueColour(e.tone, 0.35), width: 1, spanGaps: true, points: { show: false } };
        series.push(Object.assign({ label: e.label + " max" }, edge), Object.assign({ label: e.label + " min" }, edge));
        bandList.push({ series: line.band, fill: hueColour(e.tone, 0.16) });
      }
      lines.push(line);
      drawn.push(e.key);
    }
    const tip = el("div", "tip", null, box);
    tip.hidden = true;
    const full = [c.steps[0], c.steps[c.steps.length - 1]];
    const opts = {
      width: width, height: 200,
      scales: { x: { time: false } },
      series: series,
      bands: bandList,
      axes: [{ values: (u, vals) => vals.map(tick) }, { size: 60, values: (u, vals) => vals.map(tick) }],
      legend: { show: false },
      focus: { alpha: 0.35 },
      cursor: { drag: { x: true, y: false }, focus: { prox: 24 } },
      hooks: {
        setCursor: [u => showTip(u, tip, lines, state.smoothing)],
        setScale: [(u, key) => {
          if (key !== "x" || rendering) return;
          if (u.scales.x.min <= full[0] && u.scales.x.max >= full[1]) delete state.zoom[c.key];
          else state.zoom[c.key] = [u.scales.x.min, u.scales.x.max];
        }],
      },
    };
    const plot = new uPlot(opts, data, box);
    plot.over.addEventListener("mouseleave", () => { tip.hidden = true; });
    if (state.zoom[c.key]) plot.setScale("x", { min: state.zoom[c.key][0], max: state.zoom[c.key][1] });
    charts.push({ key: c.key, plot: plot, entities: drawn, lines: lines.map(l => l.index) });
    box.dataset.curves = String(lines.length);
    box.dataset.bands = String(bandList.length);
    curves += lines.length;
    bands += bandList.length;
  }
  if (D.charts.length === 0) chartsDiv.textContent = "No metric changed in these runs.";
  document.body.dataset.curves = String(curves);
  document.body.dataset.bands = String(bands);
}

function drawConstants(D) {
  byId("constants-section").hidden = D.constantMetrics.length === 0;
  const t = clear(byId("constants"));
  const head = t.createTHead().insertRow();
  ["metric", "value", "runs"].forEach((c, i) => { const th = el("th", i ? "metric" : null, c); head.appendChild(th); });
  const body = t.createTBody();
  D.constantMetrics.forEach(m => {
    const row = body.insertRow();
    row.dataset.key = m.key;
    row.insertCell().textContent = m.key;
    const v = row.insertCell(); v.textContent = fmt(m.value); v.className = "num";
    const n = row.insertCell(); n.textContent = String(m.runs); n.className = "num";
  });
}

function drawTable(D, E) {
  const t = clear(byId("params"));
  const head = t.createTHead().insertRow();
  const lead = ["run"].concat(E.group ? ["group"] : [], ["kind", "status", "tags", "note"]);
  const shortName = new Map(D.labelParams.map(p => [p.key, p.name]));
  const cols = lead.concat(D.tableParams, D.tableMetrics);
  cols.forEach((c, i) => {
    const th = el("th", i >= lead.length + D.tableParams.length ? "metric" : null, shortName.get(c) || c, head);
    if (shortName.has(c)) th.title = c;
  });
  const body = t.createTBody();
  const order = D.runs.map((r, i) => i);
  if (E.group) order.sort((a, b) => E.list.indexOf(E.of[a]) - E.list.indexOf(E.of[b]));
  order.forEach(i => {
    const r = D.runs[i], e = E.of[i];
    const row = body.insertRow();
    row.dataset.run = String(r.id);
    if (state.hidden.has(e.key)) row.className = "off";
    const name = row.insertCell();
    el("span", "swatch", null, name).style.background = e.colour;
    name.appendChild(document.createTextNode(r.label));
    if (r.named) name.title = r.name;
    if (E.group) row.insertCell().textContent = groupValue(E.group, r);
    row.insertCell().textContent = r.kind;
    const st = row.insertCell(); st.textContent = r.status; st.className = "status-" + r.status;
    const tags = row.insertCell();
    r.tags.forEach(tag => el("span", "tag", tag, tags));
    const note = row.insertCell(); note.className = "note-cell"; note.textContent = r.note; note.title = r.note;
    D.tableParams.forEach(p => { row.insertCell().textContent = r.params[p] === undefined ? "-" : r.params[p]; });
    D.tableMetrics.forEach(m => { const c = row.insertCell(); c.textContent = fmt(r.metrics[m]); c.className = "num"; });
  });
}

// Many runs: parallel coordinates and a scatter, with the metric chosen in the page.
function fillSelect(sel, options, chosen) {
  clear(sel);
  options.forEach(o => { const op = el("option", null, o, sel); op.value = o; if (o === chosen) op.selected = true; });
}
function extent(values) {
  const v = values.filter(x => x !== null && x !== undefined && !Number.isNaN(x));
  if (v.length === 0) return [0, 1];
  let lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
  if (lo === hi) { lo -= 0.5 * (Math.abs(lo) || 1); hi += 0.5 * (Math.abs(hi) || 1); }
  return [lo, hi];
}
function paramValue(r, p) { return r.params[p] === undefined ? null : Number(r.params[p]); }

function drawParallel(D, E) {
  const svg = clear(byId("parallel"));
  const numericParams = D.tableParams.filter(p => D.runs.every(r => r.params[p] === undefined || !Number.isNaN(Number(r.params[p]))) &&
                                                  D.runs.some(r => r.params[p] !== undefined));
  const metric = byId("parallel-metric").value;
  const byMetric = byId("parallel-colour").value === "metric";
  const axes = numericParams.slice(0, 10).map(p => ({ name: p, get: r => paramValue(r, p) }));
  if (metric) axes.push({ name: metric, get: r => (r.metrics[metric] === undefined ? null : r.metrics[metric]) });
  const W = 1000, H = 340, top = 40, bottom = 30, left = 60, right = 60;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  if (axes.length < 2) { svgEl("text", { x: 20, y: 30 }, svg).textContent = "Fewer than two numeric axes differ among these runs."; return; }
  const xs = axes.map((a, i) => left + i * (W - left - right) / (axes.length - 1));
  const ext = axes.map(a => extent(D.runs.map(a.get)));
  const y = (i, v) => top + (1 - (v - ext[i][0]) / (ext[i][1] - ext[i][0])) * (H - top - bottom);
  const mExt = metric ? extent(D.runs.map(r => r.metrics[metric])) : [0, 1];
  let drawn = 0;
  D.runs.forEach((r, ri) => {
    const e = E.of[ri];
    if (state.hidden.has(e.key)) return;
    let d = "", pen = false;
    axes.forEach((a, i) => {
      const v = a.get(r);
      if (v === null || Number.isNaN(v)) { pen = false; return; }
      d += (pen ? "L" : "M") + xs[i].toFixed(1) + "," + y(i, v).toFixed(1);
      pen = true;
    });
    if (!d) return;
    const mv = metric ? r.metrics[metric] : undefined;
    const shade = !byMetric ? e.colour : (mv === undefined || mv === null) ? "#999"
                : "hsl(" + (240 - 240 * (mv - mExt[0]) / (mExt[1] - mExt[0])).toFixed(0) + ",70%,45%)";
    const path = svgEl("path", { d: d, fill: "none", stroke: shade, class: "pc-line", "data-run": r.id }, svg);
    titled(path, r.label + (E.group ? "\n" + e.label : "") + "\n" + axes.map(a => a.name + " = " + fmt(a.get(r))).join("\n"));
    drawn += 1;
  });
  svg.dataset.lines = String(drawn);
  axes.forEach((a, i) => {
    svgEl("line", { x1: xs[i], x2: xs[i], y1: top, y2: H - bottom, class: "pc-axis" }, svg);
    const anchor = i === 0 ? "start" : i === axes.length - 1 ? "end" : "middle";
    const label = svgEl("text", { x: xs[i], y: top - 22, "text-anchor": anchor, class: "pc-label" }, svg);
    label.textContent = a.name;
    const hi = svgEl("text", { x: xs[i] + 4, y: top - 6, class: "pc-tick" }, svg); hi.textContent = fmt(ext[i][1]);
    const lo = svgEl("text", { x: xs[i] + 4, y: H - bottom + 16, class: "pc-tick" }, svg); lo.textContent = fmt(ext[i][0]);
  });
}

function drawScatter(D, E) {
  const svg = clear(byId("scatter"));
  const p = byId("scatter-x").value, m = byId("scatter-y").value;
  const W = 700, H = 400, left = 80, right = 20, top = 20, bottom = 50;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  // A parameter with a value that is not a number (optimizer.kind) is
  // categorical: its values, sorted, stand at equal distances.
  const raw = D.runs.map(r => r.params[p]).filter(v => v !== undefined);
  const categories = raw.some(v => Number.isNaN(Number(v))) ? Array.from(new Set(raw)).sort() : null;
  const xOf = r => r.params[p] === undefined ? null : categories ? categories.indexOf(r.params[p]) : Number(r.params[p]);
  const pts = D.runs.map((r, i) => ({ r: r, e: E.of[i], x: xOf(r), y: r.metrics[m] }))
                    .filter(q => !state.hidden.has(q.e.key) && q.x !== null && !Number.isNaN(q.x) && q.y !== undefined && q.y !== null);
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
    const c = svgEl("circle", { cx: X(q.x).toFixed(1), cy: Y(q.y).toFixed(1), r: 5, fill: q.e.colour, class: "sc-point", "data-run": q.r.id }, svg);
    titled(c, q.r.label + (E.group ? "\n" + q.e.label : "") + "\n" + p + " = " + (categories ? categories[q.x] : fmt(q.x)) + "\n" + m + " = " + fmt(q.y));
  });
  svg.dataset.points = String(pts.length);
}

function drawMany(D, E) {
  const metricKeys = D.tableMetrics;
  if (!(D.runs.length >= 3 && metricKeys.length > 0 && D.scatterParams.length > 0)) {
    byId("many").hidden = true;
    byId("few").hidden = false;
    return;
  }
  byId("many").hidden = false;
  byId("few").hidden = true;
  const numeric = D.numericParams;
  const keep = (chosen, options, otherwise) => options.indexOf(chosen) >= 0 ? chosen : otherwise;
  const pm = byId("parallel-metric"), pc = byId("parallel-colour");
  fillSelect(pm, metricKeys, keep(state.parallelMetric, metricKeys, metricKeys[0]));
  pc.value = state.parallelColour;
  pm.onchange = () => { state.parallelMetric = pm.value; drawParallel(current, entitiesOf(current)); };
  pc.onchange = () => { state.parallelColour = pc.value; drawParallel(current, entitiesOf(current)); };
  const sx = byId("scatter-x"), sy = byId("scatter-y");
  const tableNumeric = D.tableParams.filter(p => numeric.indexOf(p) >= 0);
  fillSelect(sx, D.scatterParams, keep(state.scatterX, D.scatterParams,
             tableNumeric.length ? tableNumeric[0] : numeric.length ? numeric[0] : D.scatterParams[0]));
  fillSelect(sy, metricKeys, keep(state.scatterY, metricKeys, metricKeys[0]));
  sx.onchange = () => { state.scatterX = sx.value; drawScatter(current, entitiesOf(current)); };
  sy.onchange = () => { state.scatterY = sy.value; drawScatter(current, entitiesOf(current)); };
  drawParallel(D, E);
  drawScatter(D, E);
}

// Draws the whole page from D, the document runsReportData writes. Called
// once, and again by a live page (`ipu ui`) whenever its document changed,
// and when the reader changes a choice; what the reader chose (state) stays.
function render(D) {
  const scroll = window.scrollY;
  current = D;
  rendering = true;
  try {
    const E = entitiesOf(D);
    byId("run-count").textContent = D.runs.length + " run" + (D.runs.length === 1 ? "" : "s");
    drawControls(D, E);
    drawLegend(D, E);
    drawCharts(D, E);
    drawConstants(D);
    drawTable(D, E);
    drawMany(D, E);
    document.body.dataset.entities = String(E.list.length);
    document.body.dataset.group = E.group ? E.group.id : "";
  } finally {
    rendering = false;
  }
  window.scrollTo(0, scroll);
  document.body.dataset.rendered = "yes";
  console.info("ipu report rendered: " + D.runs.length + " runs, " + document.body.dataset.curves + " curves");
}

const page = JSON.parse(document.getElementById("ipu-page").textContent);
let shown = document.getElementById("ipu-data").textContent;
render(JSON.parse(shown));
// A live page asks its server for the document again and redraws when it
// changed; a failed request is retried at the next tick, never fatal. A page
// of a fixed set of runs (stopsWhenEnded) stops asking once none of them is
// running: nothing on it changes then but tags and notes (body[data-live]
// says which).
if (page.live) {
  let busy = false;
  const running = D => !page.stopsWhenEnded || D.runs.some(r => r.status === "running");
  document.body.dataset.live = running(JSON.parse(shown)) ? "polling" : "ended";
  const timer = document.body.dataset.live === "ended" ? null : setInterval(function() {
    if (busy) return;
    busy = true;
    fetch(page.live, { cache: "no-store" }).then(r => r.ok ? r.text() : Promise.reject(r.status)).then(text => {
      if (text !== shown) {
        shown = text;
        const D = JSON.parse(text);
        render(D);
        document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
        if (!running(D)) {
          clearInterval(timer);
          document.body.dataset.live = "ended";
        }
      }
    }).catch(() => {}).finally(() => { busy = false; });
  }, page.pollMs);
}
)js";

const char* kPageStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 20px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 18px 0 6px; } h3 { font-size: 13px; margin: 4px 0 0; }
.meta, .note { color: #666; } .note { margin: 4px 0; }
#controls { margin: 8px 0 6px; } #controls label { margin-right: 18px; } #smoothing { vertical-align: middle; width: 160px; }
#legend { max-height: 150px; overflow-y: auto; border: 1px solid #e4e4e4; border-radius: 4px; padding: 4px; }
.chip { font: 12px/1.3 system-ui, sans-serif; border: 1px solid #ddd; background: #fafafa; border-radius: 10px;
        padding: 1px 8px 1px 5px; margin: 2px; cursor: pointer; color: #222; }
.chip.off { opacity: 0.35; text-decoration: line-through; }
#charts { display: flex; flex-wrap: wrap; }
.chart { position: relative; margin: 0 18px 10px 0; }
.tip { position: absolute; z-index: 10; background: rgba(255,255,255,0.95); border: 1px solid #bbb; border-radius: 4px;
       padding: 4px 6px; font-size: 12px; pointer-events: none; white-space: nowrap; box-shadow: 0 1px 4px rgba(0,0,0,0.15); }
.tip-step { font-weight: 600; } .tip-more { color: #666; }
.scroll { overflow: auto; max-height: 420px; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 13px; }
thead th { position: sticky; top: 0; background: #fff; }
th, td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: left; white-space: nowrap; }
th.metric, td.num { text-align: right; }
tr.off { opacity: 0.4; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; vertical-align: baseline; }
.tag { display: inline-block; background: #eef1f6; border-radius: 3px; padding: 0 5px; margin-right: 3px; font-size: 12px; }
.note-cell { max-width: 24em; overflow: hidden; text-overflow: ellipsis; }
.status-finished { color: #2a7d2a; } .status-failed, .status-killed { color: #b22; } .status-running { color: #1f5fbf; }
.pair { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; } .pair > div { flex: 1 1 560px; min-width: 0; }
.pc-line { stroke-width: 1.6; opacity: 0.75; } .pc-line:hover { stroke-width: 4; opacity: 1; }
.pc-axis { stroke: #444; stroke-width: 1; } .pc-label { font-size: 12px; font-weight: 600; } .pc-tick { font-size: 11px; fill: #555; }
.sc-frame { fill: none; stroke: #bbb; } .sc-point { stroke: #fff; stroke-width: 1; } .sc-point:hover { r: 8; }
svg { max-width: 100%; height: auto; }
select { margin: 0 12px 0 4px; }
)css";

}  // namespace

std::size_t curveCount(const std::vector<ReportRun>& runs) {
  const auto constants = constantMetrics(runs);
  std::size_t n = 0;
  for (const auto& r : runs)
    for (const auto& [k, pts] : r.history)
      if (hasFinite(pts) && !constants.count(k)) ++n;
  return n;
}

nlohmann::json runsReportData(const std::vector<ReportRun>& runs) {
  nlohmann::json data;
  // Runs.
  std::vector<store::RunRecord> records;
  for (const auto& r : runs) records.push_back(r.record);
  const std::size_t n = records.size();
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, std::size_t> present;
  for (const auto& r : records)
    for (const auto& [k, v] : r.parameters) {
      values[k].insert(v);
      ++present[k];
    }
  std::vector<std::string> numericParams, scatterParams, differing;
  for (const auto& [k, vs] : values) {
    bool allNumbers = std::all_of(vs.begin(), vs.end(), [](const std::string& s) {
      char* end = nullptr;
      std::strtod(s.c_str(), &end);
      return !s.empty() && *end == '\0';
    });
    if (n > 1 && (vs.size() > 1 || present[k] != n)) differing.push_back(k);
    if (allNumbers && vs.size() > 1) numericParams.push_back(k);
    if (vs.size() > 1 && (!isPhaseKey(k) || allNumbers)) scatterParams.push_back(k);
  }

  // What names a run: the parameters that differ, one per way of splitting
  // the runs, by their short names.
  const std::vector<std::string> naming = namingKeys(records, differing);
  std::vector<std::pair<std::string, std::string>> labelParams;  // short name, key
  for (const auto& k : naming) labelParams.emplace_back(shortParameterName(k, differing), k);
  std::sort(labelParams.begin(), labelParams.end());
  // The table's parameter columns: the same, in the same order.
  std::vector<std::string> tableParams;
  for (const auto& [shortKey, k] : labelParams) tableParams.push_back(k);
  std::set<store::RunKind> kinds;
  for (const auto& r : records) kinds.insert(r.kind);

  // What runs can be grouped by: a parameter (or all of them together) that
  // splits them into groups of which one at least has two runs, or their tags.
  auto groupsOf = [&](const std::vector<std::string>& keys) {
    std::set<std::vector<std::string>> groups;
    for (const auto& r : records) {
      std::vector<std::string> g;
      for (const auto& k : keys) g.push_back(r.parameters.count(k) ? r.parameters.at(k) : "\x01");
      groups.insert(g);
    }
    return groups.size();
  };
  nlohmann::json groupBy = nlohmann::json::array();
  auto groupEntry = [&](const std::vector<std::string>& keys, std::size_t groups) {
    nlohmann::json labels = nlohmann::json::array();
    for (const auto& k : keys) labels.push_back(shortParameterName(k, differing));
    std::string id = "p:";
    for (const auto& k : keys) id += (id.size() > 2 ? "|" : "") + k;
    return nlohmann::json{{"id", id}, {"keys", keys}, {"names", labels}, {"groups", groups}};
  };
  // Runs that differ only in a seed are repeats of one experiment: the
  // parameters but the seeds, together, group them (a grid of lr and
  // replicas over seeds: a group per grid point).
  std::vector<std::string> repeated, plainRepeated;  // naming keys with fewer values than runs; those but seeds
  for (const auto& [shortKey, k] : labelParams)
    if (groupsOf({k}) < n) {
      repeated.push_back(k);
      const std::size_t dot = k.rfind('.');
      if (k.substr(dot == std::string::npos ? 0 : dot + 1) != "seed") plainRepeated.push_back(k);
    }
  // The default, for many runs: those parameters together, else the one of
  // them that splits the runs finest into groups colours can tell apart,
  // else their tags.
  std::string defaultGroup;
  if (plainRepeated.size() >= 2)
    if (std::size_t g = groupsOf(plainRepeated); g < n) {
      groupBy.push_back(groupEntry(plainRepeated, g));
      defaultGroup = groupBy.back()["id"];
    }
  const bool combined = !defaultGroup.empty();
  std::size_t finest = 0;
  for (const auto& k : repeated) {
    const std::size_t g = groupsOf({k});
    groupBy.push_back(groupEntry({k}, g));
    const bool plainKey = std::find(plainRepeated.begin(), plainRepeated.end(), k) != plainRepeated.end();
    if (!combined && plainKey && g > finest && g <= kDistinguishableRuns) {
      finest = g;
      defaultGroup = groupBy.back()["id"];
    }
  }
  {
    std::set<std::string> tagSets;
    bool anyTag = false;
    for (const auto& r : records) {
      tagSets.insert(tagsText(r));
      anyTag = anyTag || !r.tags.empty();
    }
    if (anyTag && tagSets.size() >= 2 && tagSets.size() < n) {
      groupBy.push_back({{"id", kTagsGroup}, {"keys", nlohmann::json::array()}, {"names", {"tags"}}, {"groups", tagSets.size()}});
      if (defaultGroup.empty()) defaultGroup = kTagsGroup;
    }
  }
  if (n <= kDistinguishableRuns) defaultGroup.clear();

  const auto constants = constantMetrics(runs);
  std::set<std::string> metricSet;
  for (const auto& r : records)
    for (const auto& [k, s] : r.metrics)
      if (std::isfinite(s.last) && !constants.count(k)) metricSet.insert(k);
  std::vector<std::string> tableMetrics(metricSet.begin(), metricSet.end());
  std::stable_sort(tableMetrics.begin(), tableMetrics.end(),
                   [](const std::string& a, const std::string& b) { return keyRank(a) < keyRank(b); });

  data["runs"] = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json j;
    j["id"] = r.id;
    j["name"] = r.name;
    j["named"] = givenName(r);
    std::string what;
    if (givenName(r)) {
      what = shortValue(r.name);
    } else {
      std::size_t shown = 0;
      for (const auto& [shortKey, k] : labelParams) {
        if (shown == kLabelParams) {
          what += ", \xE2\x80\xA6";
          break;
        }
        auto it = r.parameters.find(k);
        what += (shown++ ? ", " : "") + shortKey + "=" + (it == r.parameters.end() ? "-" : shortValue(it->second));
      }
      if (what.empty()) what = r.training.empty() ? r.name : r.training;
    }
    if (kinds.size() > 1 && r.kind != store::RunKind::Run) what += std::string(" (") + store::name(r.kind) + ")";
    j["label"] = "#" + std::to_string(r.id) + " " + what;
    j["training"] = r.training;
    j["kind"] = store::name(r.kind);
    j["status"] = store::name(r.status);
    j["tags"] = r.tags;
    j["note"] = r.note;
    nlohmann::json params = nlohmann::json::object();
    for (const auto* keys : std::initializer_list<const std::vector<std::string>*>{&tableParams, &scatterParams, &naming})
      for (const auto& k : *keys)
        if (r.parameters.count(k)) params[k] = r.parameters.at(k);
    j["params"] = params;
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, s] : r.metrics)
      if (std::isfinite(s.last) && !constants.count(k)) metrics[k] = s.last;
    j["metrics"] = metrics;
    data["runs"].push_back(j);
  }
  data["tableParams"] = tableParams;
  data["numericParams"] = numericParams;
  data["scatterParams"] = scatterParams;
  data["tableMetrics"] = tableMetrics;
  data["labelParams"] = nlohmann::json::array();
  for (const auto& [shortKey, k] : labelParams) data["labelParams"].push_back({{"key", k}, {"name", shortKey}});
  data["groupBy"] = groupBy;
  data["defaultGroup"] = defaultGroup;
  data["distinguishable"] = kDistinguishableRuns;
  data["constantMetrics"] = nlohmann::json::array();
  for (const auto& [k, c] : constants)
    data["constantMetrics"].push_back({{"key", k}, {"value", rounded(c.value)}, {"runs", c.runs}, {"points", c.points}});

  // One chart per metric that changed: the runs' steps (or buckets of steps)
  // on x, each run's values aligned to them (null where it has no point).
  const std::size_t curves = std::max<std::size_t>(1, curveCount(runs));
  const std::size_t points = std::clamp(kMaxValuesPerReport / curves, kMinPointsPerCurve, kMaxPointsPerCurve);
  data["charts"] = nlohmann::json::array();
  for (const auto& key : orderedKeys(runs)) {
    if (constants.count(key)) continue;
    std::vector<std::pair<std::size_t, const std::vector<store::MetricPoint>*>> curvesOf;
    std::set<long long> steps;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].history.find(key);
      if (it == runs[i].history.end() || !hasFinite(it->second)) continue;
      for (const auto& p : it->second) steps.insert(p.step);
      curvesOf.emplace_back(i, &it->second);
    }
    const ChartGrid grid = gridFor(steps, points);
    nlohmann::json chart;
    chart["key"] = key;
    chart["steps"] = grid.xs;
    chart["series"] = nlohmann::json::array();
    for (const auto& [run, pts] : curvesOf) {
      std::vector<double> sum(grid.xs.size(), 0.0);
      std::vector<std::size_t> count(grid.xs.size(), 0);
      for (const auto& p : *pts)
        if (std::isfinite(p.value)) {
          const std::size_t c = grid.at(p.step);
          sum[c] += p.value;
          ++count[c];
        }
      nlohmann::json ys = nlohmann::json::array();
      for (std::size_t c = 0; c < grid.xs.size(); ++c)
        ys.push_back(count[c] ? rounded(sum[c] / static_cast<double>(count[c])) : nlohmann::json(nullptr));
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
                         {"pollMs", options.pollMilliseconds},
                         {"stopsWhenEnded", options.liveStopsWhenEnded}};
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
  html += "<h1>" + escapeHtml(title) + "</h1>\n<div class=\"meta\"><span id=\"run-count\"></span> from " + escapeHtml(source) + ", " +
          escapeHtml(store::formatTime(store::nowSeconds())) +
          ". Hover a chart for values; drag to zoom, double-click to reset; click an entry of the legend to hide or show it "
          "everywhere.</div>\n";
  html += "<div id=\"controls\"><label>group by <select id=\"group-by\"></select></label>"
          "<label>smoothing <input type=\"range\" id=\"smoothing\" min=\"0\" max=\"0.99\" step=\"0.01\" value=\"0\"> "
          "<span id=\"smoothing-value\">none</span></label><button type=\"button\" id=\"show-all\" hidden>show all</button></div>\n";
  html += "<div id=\"legend\"></div>\n<p id=\"crowded\" class=\"note\" hidden></p>\n";
  html += "<h2>Metrics over steps</h2>\n<div id=\"charts\"></div>\n";
  html += "<div id=\"constants-section\" hidden><h2>Constant metrics</h2>\n<p class=\"note\">The same value at every step of "
          "every run: no chart.</p>\n<table id=\"constants\"></table></div>\n";
  html += "<h2>Parameters</h2>\n<div class=\"scroll\"><table id=\"params\"></table></div>\n";
  html += "<div id=\"many\" hidden>\n<div class=\"pair\"><div><h2>Parallel coordinates</h2>\n"
          "<label>last axis <select id=\"parallel-metric\"></select></label><label>colour <select id=\"parallel-colour\">"
          "<option value=\"run\">of the run</option><option value=\"metric\">by the metric</option></select></label>\n"
          "<svg id=\"parallel\" xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\" height=\"340\"></svg></div>\n"
          "<div><h2>Metric against parameter</h2>\n<label>parameter <select id=\"scatter-x\"></select></label>"
          "<label>metric <select id=\"scatter-y\"></select></label>\n"
          "<svg id=\"scatter\" xmlns=\"http://www.w3.org/2000/svg\" width=\"700\" height=\"400\"></svg></div></div>\n</div>\n";
  html += "<p id=\"few\" class=\"meta\" hidden>Parallel coordinates and the metric-against-parameter scatter appear for three "
          "runs or more that differ in a parameter.</p>\n";
  html += "<script type=\"application/json\" id=\"ipu-data\">" + jsonForScript(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + "</script>\n";
  html += "<script type=\"application/json\" id=\"ipu-page\">" + jsonForScript(page.dump()) + "</script>\n";
  html += "<script>" + std::string(kPageScript) + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace ipu::report
