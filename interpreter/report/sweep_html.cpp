#include "interpreter/report/sweep_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "interpreter/report/html_text.h"
#include "interpreter/report/parameter_names.h"
#include "interpreter/store/filter.h"
#include "interpreter/store/sweep_records.h"

namespace ipu::report {

namespace {

using nlohmann::json;
using sweep::Distribution;
using store::TrialState;
using Scale = SweepReport::Scale;

bool has(double v) { return std::isfinite(v); }
json numberOrNull(double v) { return has(v) ? json(v) : json(nullptr); }

bool isLogScaled(Distribution d) {
  return d == Distribution::LogUniform || d == Distribution::QLogUniform || d == Distribution::LogNormal ||
         d == Distribution::QLogNormal;
}
bool isNormal(Distribution d) {
  return d == Distribution::Normal || d == Distribution::QNormal || d == Distribution::LogNormal ||
         d == Distribution::QLogNormal;
}

const sweep::ParamValue* valueOf(const sweep::Assignment& a, const std::string& path) {
  for (const auto& [p, v] : a)
    if (p == path) return &v;
  return nullptr;
}

// Better first, for the goal.
bool better(double a, double b, sweep::Goal goal) { return goal == sweep::Goal::Minimize ? a < b : a > b; }

// The order of the table: finished trials with a metric (best first), then
// stopped ones with a metric (their metric is from fewer steps, so they are
// not ranked with the finished), then running, queued, ended without a
// metric, failed, killed; by index within each.
int group(const store::TrialRecord& t) {
  const bool metric = has(t.metric);
  switch (t.state) {
    case TrialState::Finished: return metric ? 0 : 4;
    case TrialState::Stopped: return metric ? 1 : 4;
    case TrialState::Running: return 2;
    case TrialState::Queued: return 3;
    case TrialState::Failed: return 5;
    case TrialState::Killed: return 6;
  }
  return 7;
}

SweepReport::Axis axisFor(const sweep::ParamSpec& p, const std::vector<store::TrialRecord>& trials) {
  SweepReport::Axis axis;
  axis.path = p.path;
  axis.distribution = p.distribution;
  if (p.distribution == Distribution::Values || p.distribution == Distribution::Categorical) {
    axis.scale = Scale::Categorical;
    for (const auto& v : p.values) axis.categories.push_back(v.canonical());
    return axis;
  }
  const bool log = isLogScaled(p.distribution);
  axis.scale = log ? Scale::Log : Scale::Linear;
  double lo = INFINITY, hi = -INFINITY;
  if (!isNormal(p.distribution)) {
    lo = p.min;
    hi = p.max;
  }
  for (const auto& t : trials)
    if (const sweep::ParamValue* v = valueOf(t.assignment, p.path))
      if (v->isNumeric() && has(v->number) && (!log || v->number > 0)) {
        lo = std::min(lo, v->number);
        hi = std::max(hi, v->number);
      }
  if (!(lo <= hi)) {  // a normal form and no trial yet: the prior's middle 95%
    lo = p.mu - 2 * p.sigma;
    hi = p.mu + 2 * p.sigma;
    if (log) {
      lo = std::exp(lo);
      hi = std::exp(hi);
    }
  }
  axis.lo = lo;
  axis.hi = hi;
  return axis;
}

// ---------------------------------------------------------------- drawing

std::string num(double v) {  // coordinates
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string fmt(double v) {  // values people read
  if (!has(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A scale from values to [0, 1].
struct Mapping {
  Scale scale = Scale::Linear;
  double lo = 0, hi = 1;
  std::vector<std::string> categories;

  std::optional<double> unit(double v) const {
    if (!has(v)) return std::nullopt;
    if (scale == Scale::Log) {
      if (v <= 0) return std::nullopt;
      return hi > lo ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : 0.5;
    }
    return hi > lo ? (v - lo) / (hi - lo) : 0.5;
  }
  std::optional<double> unitOfCategory(const std::string& text) const {
    auto at = std::find(categories.begin(), categories.end(), text);
    if (at == categories.end()) return std::nullopt;
    if (categories.size() == 1) return 0.5;
    return static_cast<double>(at - categories.begin()) / static_cast<double>(categories.size() - 1);
  }
  // Round values to label the axis with: 1, 2 or 5 times a power of ten
  // (linear), powers of ten (log); the ends when there are too few.
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (scale == Scale::Log && lo > 0 && hi > lo) {
      for (double e = std::ceil(std::log10(lo) - 1e-9); e <= std::log10(hi) + 1e-9; e += 1) out.push_back(std::pow(10.0, e));
      if (out.size() >= 2) return out;
      return {lo, hi};
    }
    if (!(hi > lo)) return {lo};
    const double raw = (hi - lo) / 4, power = std::pow(10.0, std::floor(std::log10(raw)));
    double step = power;
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (m * power >= raw) {
        step = m * power;
        break;
      }
    for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
};

// The metric's scale: logarithmic when every value is positive and they
// span two decades or more (losses early and late in a sweep).
Mapping metricMapping(const std::vector<double>& values) {
  Mapping m;
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (has(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (!(lo <= hi)) return m;
  m.scale = lo > 0 && hi / lo >= 100 ? Scale::Log : Scale::Linear;
  if (lo == hi) {
    const double pad = m.scale == Scale::Log ? 0 : 0.5 * (std::abs(lo) > 0 ? std::abs(lo) : 1);
    lo -= pad;
    hi += pad;
    if (m.scale == Scale::Log) {
      lo /= 2;
      hi *= 2;
    }
  }
  m.lo = lo;
  m.hi = hi;
  return m;
}

// Quality 0 (worst) to 1 (best) to a colour: sand, teal, dark blue.
std::string qualityColour(double q) {
  static const double stops[3][3] = {{233, 196, 106}, {42, 157, 143}, {27, 58, 140}};
  q = std::clamp(q, 0.0, 1.0) * 2;
  const int i = q >= 1 ? 1 : 0;
  const double f = q - i;
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(std::lround(stops[i][0] + f * (stops[i + 1][0] - stops[i][0]))),
                static_cast<int>(std::lround(stops[i][1] + f * (stops[i + 1][1] - stops[i][1]))),
                static_cast<int>(std::lround(stops[i][2] + f * (stops[i + 1][2] - stops[i][2]))));
  return buf;
}

std::string shorten(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

// A trial's colour, the same in the history, the parallel coordinates and
// the table: its metric's quality among the trials (grey without a value).
std::map<long long, std::string> trialColours(const SweepReport& r) {
  std::vector<double> metrics;
  for (const auto& t : r.trials) metrics.push_back(t.record.metric);
  const Mapping metricMap = metricMapping(metrics);
  std::map<long long, std::string> out;
  for (const auto& row : r.trials) {
    const store::TrialRecord& t = row.record;
    const bool withMetric = has(t.metric) && (t.state == TrialState::Finished || t.state == TrialState::Stopped);
    const double u = metricMap.unit(t.metric).value_or(0.5);
    out[t.index] = withMetric ? qualityColour(r.sweep.spec.metric.goal == sweep::Goal::Minimize ? 1 - u : u) : "#b8b8b8";
  }
  return out;
}

// "trial 3: lr=0.0012, layers=4": the parameters whose values differ among
// the trials, by their short names, then every value in full.
std::string trialTitle(const SweepReport& r, const store::TrialRecord& t) {
  std::vector<std::string> paths;
  for (const auto& a : r.axes) paths.push_back(a.path);
  std::string what;
  for (const auto& a : r.axes) {
    std::set<std::string> seen;
    for (const auto& row : r.trials)
      if (const sweep::ParamValue* v = valueOf(row.record.assignment, a.path)) seen.insert(v->canonical());
    const sweep::ParamValue* v = valueOf(t.assignment, a.path);
    if (seen.size() < 2 || !v) continue;
    what += (what.empty() ? ": " : ", ") + shortParameterName(a.path, paths) + "=" +
            (v->kind == sweep::ParamValue::Kind::Number ? fmt(v->number) : v->canonical());
  }
  std::string s = "trial " + std::to_string(t.index) + what + " (" + store::name(t.state) + ")";
  for (const auto& [path, v] : t.assignment) s += "\n" + path + " = " + v.canonical();
  s += "\n" + r.sweep.spec.metric.name + " = " + fmt(t.metric);
  if (t.runId) s += "\nrun " + std::to_string(*t.runId);
  if (!t.reason.empty()) s += "\n" + t.reason;
  return s;
}

std::string text(double x, double y, const std::string& content, const std::string& cls, const std::string& anchor = "start") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" class=\"" + cls + "\" text-anchor=\"" + anchor + "\">" +
         escapeHtml(content) + "</text>";
}

std::string historySvg(const SweepReport& r) {
  const auto& metric = r.sweep.spec.metric;
  std::vector<double> values;
  for (const auto& p : r.history) values.push_back(p.metric);
  if (metric.target) values.push_back(*metric.target);
  const Mapping m = metricMapping(values);
  const double W = 900, H = 340, left = 78, right = 24, top = 20, plotBottom = H - 76, failY = H - 56;
  const double n = static_cast<double>(r.history.size());
  auto colours = trialColours(r);
  auto X = [&](std::size_t i) { return left + (static_cast<double>(i) + 0.5) / n * (W - left - right); };
  auto Y = [&](double v) { return top + (1 - m.unit(v).value_or(0)) * (plotBottom - top); };
  std::string s = "<svg id=\"history\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                  "\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" data-points=\"" + std::to_string(r.history.size()) + "\">";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(W - left - right) + "\" height=\"" +
       num(plotBottom - top) + "\" class=\"frame\"/>";
  for (double t : m.ticks()) {
    s += "<line x1=\"" + num(left) + "\" x2=\"" + num(W - right) + "\" y1=\"" + num(Y(t)) + "\" y2=\"" + num(Y(t)) + "\" class=\"grid\"/>";
    s += text(left - 6, Y(t) + 4, fmt(t), "tick", "end");
  }
  const double mid = (top + plotBottom) / 2;
  s += "<text x=\"16\" y=\"" + num(mid) + "\" class=\"axis-label\" text-anchor=\"middle\" transform=\"rotate(-90 16 " + num(mid) +
       ")\">" + escapeHtml(shorten(metric.name, 40) + (m.scale == Scale::Log ? " (log)" : "")) + "</text>";
  s += text(left - 6, failY + 4, "failed", "tick", "end");
  const std::size_t every = std::max<std::size_t>(1, r.history.size() / 12 + (r.history.size() % 12 ? 1 : 0));
  for (std::size_t i = 0; i < r.history.size(); i += every) s += text(X(i), plotBottom + 34, std::to_string(i + 1), "tick", "middle");
  s += text((left + W - right) / 2, H - 8, "trials in the order they ended", "axis-label", "middle");
  if (metric.target && has(*metric.target)) {
    const double y = Y(*metric.target);
    s += "<line x1=\"" + num(left) + "\" x2=\"" + num(W - right) + "\" y1=\"" + num(y) + "\" y2=\"" + num(y) +
         "\" class=\"target\"><title>target " + escapeHtml(fmt(*metric.target)) + "</title></line>";
    s += text(W - right - 4, y - 5, "target " + fmt(*metric.target), "tick target-label", "end");
  }
  // The best so far: a step line through the finished trials' improvements.
  std::string d;
  double last = store::kNoTime;
  for (std::size_t i = 0; i < r.history.size(); ++i) {
    const double b = r.history[i].bestSoFar;
    if (!has(b)) continue;
    if (d.empty()) d = "M" + num(X(i)) + "," + num(Y(b));
    else if (b != last) d += "H" + num(X(i)) + "V" + num(Y(b));
    last = b;
  }
  if (!d.empty()) s += "<path d=\"" + d + "H" + num(W - right) + "\" class=\"best-line\"><title>best so far</title></path>";
  for (std::size_t i = 0; i < r.history.size(); ++i) {
    const auto& p = r.history[i];
    const store::TrialRecord* t = nullptr;
    for (const auto& tr : r.trials)
      if (tr.record.index == p.index) t = &tr.record;
    const std::string title = "<title>" + escapeHtml(t ? trialTitle(r, *t) : "trial " + std::to_string(p.index)) + "</title>";
    const double x = X(i);
    if (p.state == TrialState::Failed || p.state == TrialState::Killed || !has(p.metric)) {
      s += "<path d=\"M" + num(x - 5) + "," + num(failY - 5) + "l10,10m0,-10l-10,10\" class=\"pt-failed\" data-trial=\"" +
           std::to_string(p.index) + "\">" + title + "</path>";
    } else if (p.state == TrialState::Stopped) {
      const double y = Y(p.metric);
      s += "<path d=\"M" + num(x) + "," + num(y - 6) + "l6,6l-6,6l-6,-6z\" class=\"pt-stopped\" data-trial=\"" +
           std::to_string(p.index) + "\" style=\"fill:" + colours[p.index] + "\">" + title + "</path>";
    } else {
      const bool best = r.best && *r.best == p.index;
      s += "<circle cx=\"" + num(x) + "\" cy=\"" + num(Y(p.metric)) + "\" r=\"" + (best ? "7" : "5") + "\" class=\"pt-finished" +
           (best ? " pt-best" : "") + "\" data-trial=\"" + std::to_string(p.index) + "\" style=\"fill:" + colours[p.index] + "\">" +
           title + "</circle>";
    }
  }
  s += "</svg>";
  return s;
}

std::string parallelSvg(const SweepReport& r) {
  struct Column {
    std::string label;
    Mapping map;
    std::string path;  // "" for the metric
  };
  std::vector<Column> cols;
  for (const auto& a : r.axes) {
    Column c;
    c.label = a.path;
    c.path = a.path;
    c.map.scale = a.scale;
    c.map.lo = a.lo;
    c.map.hi = a.hi;
    c.map.categories = a.categories;
    cols.push_back(std::move(c));
  }
  std::vector<double> metrics;
  for (const auto& t : r.trials) metrics.push_back(t.record.metric);
  const Mapping metricMap = metricMapping(metrics);
  const auto& metric = r.sweep.spec.metric;
  cols.push_back({metric.name + " (" + sweep::goalName(metric.goal) + ")", metricMap, ""});

  auto colours = trialColours(r);
  const double W = 1000, H = 400, top = 56, bottom = 44, left = 80, right = 110;
  auto X = [&](std::size_t i) {
    return cols.size() < 2 ? left : left + static_cast<double>(i) * (W - left - right) / static_cast<double>(cols.size() - 1);
  };
  auto Y = [&](double u) { return top + (1 - u) * (H - top - bottom); };
  std::string s = "<svg id=\"parallel\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                  "\" width=\"" + num(W) + "\" height=\"" + num(H) + "\">";
  // Worst first, so the best lines are on top; the best trial last of all.
  std::size_t lines = 0;
  for (auto it = r.trials.rbegin(); it != r.trials.rend(); ++it) {
    const store::TrialRecord& t = it->record;
    std::string d;
    bool pen = false;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      std::optional<double> u;
      if (cols[i].path.empty()) {
        u = cols[i].map.unit(t.metric);
      } else if (const sweep::ParamValue* v = valueOf(t.assignment, cols[i].path)) {
        u = cols[i].map.scale == Scale::Categorical ? cols[i].map.unitOfCategory(v->canonical())
            : v->isNumeric()                        ? cols[i].map.unit(v->number)
                                                    : std::nullopt;
      }
      if (!u) {
        pen = false;
        continue;
      }
      d += (pen ? "L" : "M") + num(X(i)) + "," + num(Y(std::clamp(*u, 0.0, 1.0)));
      pen = true;
    }
    if (d.empty()) continue;
    ++lines;
    const bool withMetric = has(t.metric) && (t.state == TrialState::Finished || t.state == TrialState::Stopped);
    std::string cls = "pc-line";
    const std::string stroke = colours[t.index];
    if (!withMetric) cls += " pc-nometric";
    if (t.state == TrialState::Stopped) cls += " pc-stopped";
    if (it->best) {
      cls += " pc-best";
      s += "<path d=\"" + d + "\" class=\"pc-best-halo\"/>";
    }
    s += "<path d=\"" + d + "\" stroke=\"" + stroke + "\" class=\"" + cls + "\" data-trial=\"" + std::to_string(t.index) +
         "\"><title>" + escapeHtml(trialTitle(r, t)) + "</title></path>";
  }
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const double x = X(i);
    s += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(top) + "\" y2=\"" + num(H - bottom) + "\" class=\"pc-axis\"/>";
    const std::string anchor = i == 0 ? "start" : i + 1 == cols.size() ? "end" : "middle";
    const Mapping& map = cols[i].map;
    std::string label = shorten(cols[i].label, 28);
    if (map.scale == Scale::Log) label += " (log)";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(top - 30) + "\" class=\"pc-label\" text-anchor=\"" + anchor + "\">" +
         escapeHtml(label) + "<title>" + escapeHtml(cols[i].label) + "</title></text>";
    if (map.scale == Scale::Categorical) {
      for (const auto& c : map.categories)
        s += "<text x=\"" + num(x + 5) + "\" y=\"" + num(Y(*map.unitOfCategory(c)) + 4) + "\" class=\"pc-tick\">" +
             escapeHtml(shorten(c, 18)) + "<title>" + escapeHtml(c) + "</title></text>";
    } else if (!cols[i].path.empty() || std::any_of(metrics.begin(), metrics.end(), has)) {
      for (double t : map.ticks())
        if (auto u = map.unit(t); u && *u >= -1e-9 && *u <= 1 + 1e-9)
          s += text(x + 5, Y(*u) + 4, fmt(t), "pc-tick");
    }
  }
  // The colour key: best at the top.
  const double kx = W - 26;
  s += "<defs><linearGradient id=\"quality\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">";
  for (int k = 0; k <= 4; ++k)
    s += "<stop offset=\"" + std::to_string(k * 25) + "%\" stop-color=\"" + qualityColour(1 - k / 4.0) + "\"/>";
  s += "</linearGradient></defs><rect x=\"" + num(kx) + "\" y=\"" + num(top) + "\" width=\"10\" height=\"" + num(H - top - bottom) +
       "\" fill=\"url(#quality)\"/>";
  s += text(kx + 5, top - 8, "best", "pc-tick", "middle") + text(kx + 5, H - bottom + 16, "worst", "pc-tick", "middle");
  s += "</svg>";
  return "<div data-lines=\"" + std::to_string(lines) + "\" id=\"parallel-box\">" + s + "</div>";
}

std::string bar(std::optional<double> v, bool signedBar) {
  if (!v) return "<td class=\"num\">-</td><td></td>";
  char value[16];
  std::snprintf(value, sizeof value, signedBar ? "%+.2f" : "%.2f", *v);
  const double w = std::clamp(std::abs(*v), 0.0, 1.0) * (signedBar ? 50 : 100);
  std::string style = signedBar ? (*v >= 0 ? "left:50%;width:" + num(w) + "%" : "left:" + num(50 - w) + "%;width:" + num(w) + "%")
                                : "left:0;width:" + num(w) + "%";
  return "<td class=\"num\">" + std::string(value) + "</td><td><div class=\"bar" + (signedBar ? " signed" : "") +
         "\"><span class=\"" + (signedBar && *v < 0 ? "neg" : "pos") + "\" style=\"" + style + "\"></span></div></td>";
}

const char* kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 20px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.meta, .note { color: #666; } .note { margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; white-space: nowrap; }
td.num, th.num { text-align: right; }
.state-finished { color: #2a7d2a; } .state-failed, .state-killed { color: #b22; } .state-running { color: #1f5fbf; }
.state-stopped { color: #b46a00; } .state-queued { color: #777; }
tr.best td { font-weight: 600; background: #eef3fb; }
svg { max-width: 100%; height: auto; }
.frame { fill: none; stroke: #bbb; } .grid { stroke: #eee; } .tick, .pc-tick { font-size: 11px; fill: #555; }
.axis-label { font-size: 12px; fill: #333; }
.target { stroke: #2a7d2a; stroke-dasharray: 6 4; stroke-width: 1.5; } .target-label { fill: #2a7d2a; }
.best-line { fill: none; stroke: #1b3a8c; stroke-width: 2; }
.pt-finished { fill: #2a9d8f; stroke: #fff; stroke-width: 1; } .pt-best { fill: #1b3a8c; }
.pt-stopped { fill: #fff; stroke: #b46a00; stroke-width: 2; } .pt-failed { stroke: #b22; stroke-width: 2.5; fill: none; }
.pc-line { fill: none; stroke-width: 1.8; opacity: 0.85; } .pc-line:hover { stroke-width: 4; opacity: 1; }
.pc-nometric { stroke-width: 1.2; opacity: 0.6; } .pc-stopped { stroke-dasharray: 5 3; }
.pc-best { stroke-width: 3.5; opacity: 1; } .pc-best-halo { fill: none; stroke: #000; stroke-width: 6.5; opacity: 0.85; }
.pc-axis { stroke: #444; stroke-width: 1; } .pc-label { font-size: 12px; font-weight: 600; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; }
.legend span { margin-right: 16px; } .legend svg { vertical-align: middle; }
.bar { position: relative; width: 160px; height: 10px; background: #f1f1f1; } .bar span { position: absolute; top: 0; height: 10px; }
.bar .pos { background: #2a6fb4; } .bar .neg { background: #d08a2e; } .bar.signed::after { content: ""; position: absolute; left: 50%; top: -2px; height: 14px; border-left: 1px solid #888; }
)css";

const char* kLegend =
    "<div class=\"legend meta\"><span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"5\" class=\"pt-finished\"/></svg> "
    "finished (in the colour of its metric, as everywhere on the page)</span><span><svg width=\"14\" height=\"14\"><path d=\"M7,1l6,6l-6,6l-6,-6z\" class=\"pt-stopped\"/></svg> stopped "
    "early</span><span><svg width=\"12\" height=\"12\"><path d=\"M1,1l10,10m0,-10l-10,10\" class=\"pt-failed\"/></svg> failed or "
    "killed</span><span><svg width=\"22\" height=\"8\"><path d=\"M0,4H22\" class=\"best-line\"/></svg> best so far</span>"
    "<span><svg width=\"22\" height=\"8\"><path d=\"M0,4H22\" class=\"target\"/></svg> target</span></div>\n";

}  // namespace

SweepReport buildSweepReport(const store::SweepRecord& sweep, const std::vector<store::TrialRecord>& trials,
                             const std::map<long long, long long>& runSteps, const std::string& source) {
  SweepReport r;
  r.sweep = sweep;
  r.source = source;
  const sweep::Goal goal = sweep.spec.metric.goal;
  for (TrialState s : {TrialState::Queued, TrialState::Running, TrialState::Finished, TrialState::Failed, TrialState::Killed,
                       TrialState::Stopped})
    r.counts[s] = 0;
  for (const auto& t : trials) ++r.counts[t.state];
  for (const auto& p : sweep.spec.parameters) r.axes.push_back(axisFor(p, trials));

  // The table, best first.
  std::vector<const store::TrialRecord*> order;
  for (const auto& t : trials) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [&](const store::TrialRecord* a, const store::TrialRecord* b) {
    const int ga = group(*a), gb = group(*b);
    if (ga != gb) return ga < gb;
    if (ga <= 1 && a->metric != b->metric) return better(a->metric, b->metric, goal);
    return a->index < b->index;
  });
  long long rank = 0;
  for (const auto* t : order) {
    SweepReport::Trial row;
    row.record = *t;
    if (t->runId)
      if (auto at = runSteps.find(*t->runId); at != runSteps.end()) row.steps = at->second;
    if (group(*t) == 0) {
      row.rank = ++rank;
      if (rank == 1) {
        row.best = true;
        r.best = t->index;
      }
    }
    r.trials.push_back(std::move(row));
  }

  // The history: ended trials by the time they ended (then created, then index).
  std::vector<const store::TrialRecord*> ended;
  for (const auto& t : trials)
    if (t.state == TrialState::Finished || t.state == TrialState::Stopped || t.state == TrialState::Failed ||
        t.state == TrialState::Killed)
      ended.push_back(&t);
  auto when = [](const store::TrialRecord* t) { return has(t->endedAt) ? t->endedAt : has(t->createdAt) ? t->createdAt : 0.0; };
  std::stable_sort(ended.begin(), ended.end(), [&](const store::TrialRecord* a, const store::TrialRecord* b) {
    if (when(a) != when(b)) return when(a) < when(b);
    return a->index < b->index;
  });
  double best = store::kNoTime;
  for (const auto* t : ended) {
    const bool scored = t->state == TrialState::Finished || t->state == TrialState::Stopped;
    const double metric = scored ? t->metric : store::kNoTime;
    if (t->state == TrialState::Finished && has(metric) && (!has(best) || better(metric, best, goal))) best = metric;
    r.history.push_back({t->index, t->state, metric, best});
  }

  // Importance from the trials with a result (as the Bayesian search observes them).
  std::vector<sweep::Observation> observations;
  for (const auto& t : trials)
    if ((t.state == TrialState::Finished || t.state == TrialState::Stopped) && has(t.metric))
      observations.push_back({t.assignment, t.metric});
  r.importance = sweep::parameterImportance(sweep.spec, observations);
  return r;
}

json sweepReportJson(const SweepReport& r) {
  const auto& spec = r.sweep.spec;
  json counts = json::object();
  long long total = 0;
  for (const auto& [state, n] : r.counts) {
    counts[store::name(state)] = n;
    total += n;
  }
  json out;
  out["sweep"] = {{"id", r.sweep.id},
                  {"name", r.sweep.name},
                  {"training", spec.training},
                  {"method", sweep::methodName(spec.method)},
                  {"state", store::name(r.sweep.state)},
                  {"created_at", numberOrNull(r.sweep.createdAt)},
                  {"metric",
                   {{"name", spec.metric.name},
                    {"goal", sweep::goalName(spec.metric.goal)},
                    {"target", spec.metric.target ? numberOrNull(*spec.metric.target) : json(nullptr)}}},
                  {"total", total},
                  {"counts", counts},
                  {"store", r.source}};
  json params = json::array();
  for (const auto& a : r.axes) {
    json p = {{"path", a.path},
              {"distribution", sweep::distributionName(a.distribution)},
              {"scale", a.scale == Scale::Log ? "log" : a.scale == Scale::Linear ? "linear" : "categorical"}};
    if (a.scale == Scale::Categorical) p["values"] = a.categories;
    else {
      p["min"] = numberOrNull(a.lo);
      p["max"] = numberOrNull(a.hi);
    }
    params.push_back(p);
  }
  out["parameters"] = params;
  out["best"] = r.best ? json(*r.best) : json(nullptr);
  json history = json::array();
  for (const auto& h : r.history)
    history.push_back({{"index", h.index},
                       {"state", store::name(h.state)},
                       {"metric", numberOrNull(h.metric)},
                       {"best_so_far", numberOrNull(h.bestSoFar)}});
  out["history"] = history;
  json trials = json::array();
  for (const auto& row : r.trials) {
    const auto& t = row.record;
    trials.push_back({{"index", t.index},
                      {"rank", row.rank ? json(*row.rank) : json(nullptr)},
                      {"best", row.best},
                      {"state", store::name(t.state)},
                      {"assignment", store::toJson(t.assignment)},
                      {"key", t.key},
                      {"metric", numberOrNull(t.metric)},
                      {"run_id", t.runId ? json(*t.runId) : json(nullptr)},
                      {"steps", row.steps ? json(*row.steps) : json(nullptr)},
                      {"created_at", numberOrNull(t.createdAt)},
                      {"ended_at", numberOrNull(t.endedAt)},
                      {"reason", t.reason}});
  }
  out["trials"] = trials;
  const auto& imp = r.importance;
  json ip = json::array();
  for (const auto& p : imp.parameters)
    ip.push_back({{"path", p.path},
                  {"spearman", p.spearman ? json(*p.spearman) : json(nullptr)},
                  {"importance", p.importance ? json(*p.importance) : json(nullptr)}});
  out["importance"] = {{"method", "gp_main_effect"},
                       {"observations", imp.observations},
                       {"ignored", imp.ignored},
                       {"minimum_observations", sweep::minimumObservations(spec.parameters.size())},
                       {"model_fitted", imp.modelFitted},
                       {"reliable", imp.reliable},
                       {"noise_share", imp.modelFitted ? json(imp.noiseShare) : json(nullptr)},
                       {"interactions", imp.modelFitted ? json(imp.interactions) : json(nullptr)},
                       {"notes", imp.notes},
                       {"parameters", ip}};
  return out;
}

std::string sweepReportHtml(const SweepReport& r, const std::string& title) {
  const auto& spec = r.sweep.spec;
  std::string html;
  html.reserve(100000);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escapeHtml(title) + "</title>\n";
  // First, so that any later error is counted (tests/store/sweep_report_test.py reads these).
  html += "<script>window.ipuErrors=[];function ipuError(m){window.ipuErrors.push(String(m));"
          "document.documentElement.setAttribute('data-errors',String(window.ipuErrors.length));}"
          "window.addEventListener('error',function(e){ipuError(e.message);});"
          "(function(){var ce=console.error;console.error=function(){ipuError(Array.prototype.join.call(arguments,' '));"
          "return ce.apply(console,arguments);};})();</script>\n";
  html += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  html += "<h1>" + escapeHtml(title) + "</h1>\n";
  std::string counts;
  for (const auto& [state, n] : r.counts)
    if (n > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + store::name(state);
  long long total = 0;
  for (const auto& [state, n] : r.counts) total += n;
  html += "<div class=\"meta\">sweep <b>" + escapeHtml(r.sweep.name) + "</b> (" + sweep::methodName(spec.method) + " over <code>" +
          escapeHtml(spec.training) + "</code>), " + store::name(r.sweep.state) + "; metric <b>" + escapeHtml(spec.metric.name) +
          "</b>, " + sweep::goalName(spec.metric.goal) +
          (spec.metric.target ? ", target " + escapeHtml(fmt(*spec.metric.target)) : std::string()) + "; " +
          std::to_string(total) + " trial" + (total == 1 ? "" : "s") + (counts.empty() ? "" : ": " + counts) + ". From " +
          escapeHtml(r.source) + ", " + escapeHtml(store::formatTime(store::nowSeconds())) +
          ". Hover a point or a line for the trial.</div>\n";
  bool anyMetric = false;
  for (const auto& h : r.history) anyMetric = anyMetric || has(h.metric);
  if (r.best) {
    for (const auto& row : r.trials)
      if (row.best)
        html += "<p>Best: trial " + std::to_string(row.record.index) + ", " + escapeHtml(spec.metric.name) + " " +
                escapeHtml(fmt(row.record.metric)) + (row.record.runId ? " (run " + std::to_string(*row.record.runId) + ")" : "") +
                ": <code>" + escapeHtml(row.record.key) + "</code></p>\n";
  }

  html += "<h2 id=\"history-section\">Optimisation history</h2>\n";
  if (!anyMetric)
    html += "<p class=\"note\" id=\"no-trial\">No trial has finished yet" +
            std::string(r.history.empty() ? "." : " with a value of the metric.") + "</p>\n";
  if (!r.history.empty()) html += kLegend + historySvg(r) + "\n";

  html += "<h2 id=\"parallel-section\">Parallel coordinates</h2>\n";
  if (r.trials.empty()) {
    html += "<p class=\"note\">No trial yet.</p>\n";
  } else {
    html += "<p class=\"meta\">One line per trial, coloured by its " + escapeHtml(spec.metric.name) +
            " (grey: no value yet, or failed); dashed: stopped early; outlined: the best trial.</p>\n" + parallelSvg(r) + "\n";
  }

  html += "<h2 id=\"importance-section\">Parameter importance</h2>\n";
  const auto& imp = r.importance;
  html += "<p class=\"meta\">From the " + std::to_string(imp.observations) + " finished and stopped trials with a value. "
          "<b>Spearman</b>: the rank correlation of the parameter's value with " + escapeHtml(spec.metric.name) +
          ", signed (+: larger values go with a larger " + escapeHtml(spec.metric.name) +
          "); numbers only, monotone effects only. <b>Importance</b>: the share of the metric's variance the parameter "
          "explains alone (its main effect, fANOVA-style) under a Gaussian-process model of the trials, the model the "
          "Bayesian search uses; any shape of effect, as well as the model fits.</p>\n";
  html += "<table id=\"importance\"><thead><tr><th>parameter</th><th class=\"num\">Spearman</th><th></th><th class=\"num\">"
          "importance</th><th></th></tr></thead><tbody>\n";
  for (const auto& p : imp.parameters)
    html += "<tr><td>" + escapeHtml(p.path) + "</td>" + bar(p.spearman, true) + bar(p.importance, false) + "</tr>\n";
  html += "</tbody></table>\n";
  if (imp.modelFitted)
    html += "<p class=\"note\">Interactions and what the main effects leave: " + escapeHtml(fmt(imp.interactions)) +
            " of the variance; the model's noise share: " + escapeHtml(fmt(imp.noiseShare)) + ".</p>\n";
  for (const auto& n : imp.notes) html += "<p class=\"note importance-note\">" + escapeHtml(n) + "</p>\n";

  html += "<h2 id=\"trials-section\">Trials</h2>\n<div style=\"overflow-x:auto\"><table id=\"trials\"><thead><tr><th>rank</th>"
          "<th>trial</th><th>state</th>";
  for (const auto& a : r.axes) html += "<th>" + escapeHtml(a.path) + "</th>";
  html += "<th class=\"num\">" + escapeHtml(spec.metric.name) + "</th><th class=\"num\">run</th><th class=\"num\">steps</th>"
          "<th>note</th></tr></thead><tbody>\n";
  auto colours = trialColours(r);
  for (const auto& row : r.trials) {
    const auto& t = row.record;
    html += "<tr data-trial=\"" + std::to_string(t.index) + "\"" + (row.best ? " class=\"best\"" : "") + "><td class=\"num\">" +
            (row.rank ? std::to_string(*row.rank) : "") + "</td><td class=\"num\"><span class=\"swatch\" style=\"background:" +
            colours[t.index] + "\"></span>" + std::to_string(t.index) + "</td><td class=\"state-" + store::name(t.state) + "\">" + store::name(t.state) + "</td>";
    for (const auto& a : r.axes) {
      const sweep::ParamValue* v = valueOf(t.assignment, a.path);
      // Numbers drawn at random have 17 digits: 6 are shown, all in the hover.
      if (v && v->kind == sweep::ParamValue::Kind::Number)
        html += "<td title=\"" + escapeHtml(v->canonical()) + "\">" + escapeHtml(fmt(v->number)) + "</td>";
      else
        html += "<td>" + (v ? escapeHtml(v->canonical()) : std::string("-")) + "</td>";
    }
    html += "<td class=\"num\">" + escapeHtml(fmt(t.metric)) + "</td><td class=\"num\">" +
            (t.runId ? std::to_string(*t.runId) : "-") + "</td><td class=\"num\">" +
            (row.steps ? std::to_string(*row.steps) : "-") + "</td><td>" + escapeHtml(t.reason) + "</td></tr>\n";
  }
  if (r.trials.empty())
    html += "<tr><td colspan=\"" + std::to_string(7 + r.axes.size()) + "\" class=\"note\">No trial yet.</td></tr>\n";
  html += "</tbody></table></div>\n";
  // Text that is not UTF-8 (a reason a hook wrote) becomes U+FFFD rather than an exception.
  const std::string data = sweepReportJson(r).dump(-1, ' ', false, json::error_handler_t::replace);
  html += "<script type=\"application/json\" id=\"ipu-sweep-data\">" + jsonForScript(data) + "</script>\n";
  html += "<script>\"use strict\";(function(){const D=JSON.parse(document.getElementById(\"ipu-sweep-data\").textContent);"
          "document.body.dataset.trials=String(D.trials.length);document.body.dataset.rendered=\"yes\";"
          "console.info(\"ipu sweep report rendered: \"+D.trials.length+\" trials\");})();</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace ipu::report
