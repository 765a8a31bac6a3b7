#include "interpreter/report/timeline_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "interpreter/report/estimate_report.h"

namespace ipu::report {

using cost::Activity;

namespace {

char glyph(Activity a) {
  switch (a) {
    case Activity::Forward: return 'F';
    case Activity::Recompute: return 'R';
    case Activity::Backward: return 'B';
    case Activity::Exchange: return 'x';
    case Activity::Idle: return '.';
    case Activity::AllReduce: return 'A';
    case Activity::Streaming: return 'S';
    case Activity::Optimizer: return 'U';
    case Activity::Overhead: return 'o';
  }
  return '?';
}

const char* colour(Activity a) {
  switch (a) {
    case Activity::Forward: return "#4c78a8";
    case Activity::Recompute: return "#9ecae9";
    case Activity::Backward: return "#f58518";
    case Activity::Exchange: return "#54a24b";
    case Activity::Idle: return "#eeeeee";
    case Activity::AllReduce: return "#e45756";
    case Activity::Streaming: return "#b279a2";
    case Activity::Optimizer: return "#eeca3b";
    case Activity::Overhead: return "#9d755d";
  }
  return "#000000";
}

// Which cycles to draw: all of them when few, otherwise the first and last
// `edge` cycles (fill and drain, plus a few of the steady state).
struct Window {
  long long first, last;  // drawn: [0, first) and [last, cycles)
  bool broken;
};
Window window(long long cycles, long long edge) {
  if (cycles <= 2 * edge + 1) return {cycles, cycles, false};
  return {edge, cycles - edge, true};
}

}  // namespace

void drawTimelineAscii(std::ostream& os, const cost::Timeline& t, int shard, const base::Painter& p) {
  if (t.ipus == 0 || t.cycles == 0) return;
  const int perCycle = 4;  // characters per drawn cycle
  const long long edge = 10;
  Window w = window(t.cycles, edge);
  std::vector<std::string> rows(static_cast<std::size_t>(t.ipus));
  // Segments of the drawn cycles, by IPU and cycle.
  std::map<std::pair<int, long long>, std::vector<const cost::Segment*>> drawn;
  for (const auto& s : t.segments)
    if (s.cycle >= 0 && (s.cycle < w.first || s.cycle >= w.last)) drawn[{s.ipu, s.cycle}].push_back(&s);
  // Each drawn cycle: `perCycle` characters for a steady-state cycle, fewer
  // (at least one) for a shorter ramp cycle, each the activity at its
  // midpoint.
  auto drawCycle = [&](long long c) {
    const double start = t.cycleStart[static_cast<std::size_t>(c)];
    const double length = t.cycleStart[static_cast<std::size_t>(c) + 1] - start;
    const int n = std::clamp(static_cast<int>(std::lround(length / std::max(t.cycleTime, 1e-300) * perCycle)), 1, perCycle);
    for (int g = 0; g < t.ipus; ++g) {
      const auto& segs = drawn[{g, c}];
      for (int k = 0; k < n; ++k) {
        double at = start + (k + 0.5) / n * length;
        Activity a = Activity::Idle;
        for (const cost::Segment* s : segs)
          if (at >= s->start && at < s->end) a = s->activity;
        rows[static_cast<std::size_t>(g)] += glyph(a);
      }
    }
  };
  for (long long c = 0; c < w.first; ++c) drawCycle(c);
  if (w.broken)
    for (auto& r : rows) r += " ~ ";
  for (long long c = w.last; c < t.cycles; ++c) drawCycle(c);
  // The end of the step, proportionally to one cycle's width.
  std::vector<std::pair<Activity, double>> tail;
  for (const auto& s : t.segments)
    if (s.cycle < 0 && s.ipu == 0) tail.emplace_back(s.activity, s.end - s.start);
  for (auto& r : rows) r += "|";
  for (const auto& [a, d] : tail) {
    int n = std::clamp(static_cast<int>(std::round(d / t.cycleTime * perCycle)), 1, 20);
    for (auto& r : rows) r += std::string(static_cast<std::size_t>(n), glyph(a));
  }
  os << "  " << p.paint(base::Style::Dim, "timeline of one step (one column = a quarter cycle of " + formatDuration(t.cycleTime) + ")") << "\n";
  for (int g = 0; g < t.ipus; ++g) {
    std::string label = shard > 1 ? std::to_string(g * shard) + "-" + std::to_string(g * shard + shard - 1) : std::to_string(g);
    std::string line;
    for (char c : rows[static_cast<std::size_t>(g)]) {
      std::string one(1, c);
      switch (c) {
        case 'F': line += p.paint(base::Style::Accent, one); break;
        case 'B': line += p.paint(base::Style::Warning, one); break;
        case 'R': line += p.paint(base::Style::Note, one); break;
        case 'A': line += p.paint(base::Style::Error, one); break;
        case '.': line += p.paint(base::Style::Dim, one); break;
        default: line += one;
      }
    }
    os << "  IPU " << label << std::string(label.size() < 6 ? 6 - label.size() : 0, ' ') << line << "\n";
  }
  std::ostringstream legend;
  legend << "F forward  R recompute  B backward  x exchange  . idle  | end of pipeline:  A all-reduce  S streaming  U update"
            "  o overhead";
  if (w.broken) legend << "\n  ~ " << (w.last - w.first) << " steady-state cycles not drawn";
  os << "  " << p.paint(base::Style::Dim, legend.str()) << "\n";
}

std::string drawTimelineSvg(const cost::Timeline& t, const std::string& title, int shard) {
  const double rowH = 22, left = 90, top = 40, cycleW = 28, gap = 40;
  const long long edge = 12;
  Window w = window(t.cycles, edge);
  double tailTime = 0;
  for (const auto& s : t.segments)
    if (s.cycle < 0 && s.ipu == 0) tailTime += s.end - s.start;
  const double tailW = std::clamp(tailTime / std::max(t.cycleTime, 1e-12) * cycleW, 40.0, 240.0);
  // To scale: a steady-state cycle is cycleW wide, a ramp cycle its share.
  const double perSecond = cycleW / std::max(t.cycleTime, 1e-300);
  const double firstEnd = t.cycleStart[static_cast<std::size_t>(w.first)], lastStart = t.cycleStart[static_cast<std::size_t>(w.last)];
  const double pipelineEndTime = t.cycleStart.back();
  const double drawn = (firstEnd + (pipelineEndTime - lastStart)) * perSecond;
  const double width = left + drawn + (w.broken ? gap : 0) + 16 + tailW + 20;
  const double height = top + t.ipus * rowH + 70;
  auto xOf = [&](double time) {
    if (time <= firstEnd) return left + time * perSecond;
    return left + (firstEnd + time - lastStart) * perSecond + (w.broken ? gap : 0);
  };
  std::ostringstream s;
  char buf[256];
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << std::lround(width) << "\" height=\"" << std::lround(height)
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<text x=\"10\" y=\"20\" font-weight=\"bold\">" << title << "</text>\n";
  for (const auto& seg : t.segments) {
    double x0, x1;
    if (seg.cycle >= 0) {
      if (seg.cycle >= w.first && seg.cycle < w.last) continue;
      x0 = xOf(seg.start);
      x1 = xOf(seg.end);
    } else {
      double pipelineEnd = xOf(pipelineEndTime) + 16;
      x0 = pipelineEnd + (seg.start - pipelineEndTime) / tailTime * tailW;
      x1 = pipelineEnd + (seg.end - pipelineEndTime) / tailTime * tailW;
    }
    std::snprintf(buf, sizeof buf, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>%s</title></rect>\n",
                  x0, top + seg.ipu * rowH, std::max(0.0, x1 - x0), rowH - 4, colour(seg.activity), cost::name(seg.activity));
    s << buf;
  }
  for (int g = 0; g < t.ipus; ++g) {
    std::string label = shard > 1 ? std::to_string(g * shard) + "-" + std::to_string(g * shard + shard - 1) : std::to_string(g);
    std::snprintf(buf, sizeof buf, "<text x=\"10\" y=\"%.2f\">IPU %s</text>\n", top + g * rowH + 13, label.c_str());
    s << buf;
  }
  if (w.broken) {
    double x = left + firstEnd * perSecond;
    std::snprintf(buf, sizeof buf, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">~</text>\n<text x=\"%.2f\" y=\"%.2f\" "
                  "text-anchor=\"middle\" font-size=\"10\">%lld cycles</text>\n",
                  x + gap / 2, top + t.ipus * rowH / 2, x + gap / 2, top + t.ipus * rowH + 12, w.last - w.first);
    s << buf;
  }
  double lx = 10, ly = top + t.ipus * rowH + 34;
  for (Activity a : {Activity::Forward, Activity::Recompute, Activity::Backward, Activity::Exchange, Activity::Idle,
                     Activity::AllReduce, Activity::Streaming, Activity::Optimizer, Activity::Overhead}) {
    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                  lx, ly, colour(a), lx + 16, ly + 10, cost::name(a));
    s << buf;
    lx += 100;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"10\" y=\"%.1f\" font-size=\"10\">cycle %s, step %s</text>\n", ly + 30,
                formatDuration(t.cycleTime).c_str(), formatDuration(t.stepTime).c_str());
  s << buf << "</svg>\n";
  return s.str();
}

}  // namespace ipu::report
