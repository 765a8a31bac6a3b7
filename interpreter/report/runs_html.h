// The HTML report of recorded runs (`ipu report`, docs/tracking.md): one
// self-contained file, with no network access and no file beside it, so it
// works offline and can be mailed. It is made to stay readable with hundreds
// of runs on one screen:
//   - one legend for the page (not one per chart), each run (or group) in one
//     colour everywhere: curves, table, parallel coordinates, scatter. A
//     run's colour comes from its id alone, so it stays when runs are added;
//   - runs named by what differs among them (`#3 lr.peak=0.02, replicas=2`),
//     or by the name given with `ipu run --name`;
//   - runs grouped by a parameter or by their tags (chosen in the page): a
//     group is drawn as its mean with a min-max band;
//   - curves smoothed (an exponential moving average, as TensorBoard's) on
//     request, the raw values still shown on hover;
//   - metrics that never changed (loss_scale, skipped) in a small table
//     rather than as flat charts;
//   - the parameter table with tags and notes, and for three runs or more
//     parallel coordinates and a scatter of a metric against a parameter.
// The data travel as one JSON document inside the page (runsReportData); the
// page's script draws everything from it (uPlot, embedded: third_party/uplot,
// and SVG). Curves are thinned onto one grid of steps per chart (averaging
// the points of a bucket) so that the whole document holds at most
// kMaxValuesPerReport values and each curve at most kMaxPointsPerCurve.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::report {

constexpr std::size_t kMaxPointsPerCurve = 2000;
// The budget of curve values in one report; a curve keeps at least
// kMinPointsPerCurve points however many runs share the budget.
constexpr std::size_t kMaxValuesPerReport = 400000;
constexpr std::size_t kMinPointsPerCurve = 200;
// Past this many runs drawn one by one, colours are hard to tell apart: the
// page says so and, when a parameter splits the runs into groups, groups them
// by default.
constexpr std::size_t kDistinguishableRuns = 20;

struct ReportRun {
  store::RunRecord record;
  std::map<std::string, std::vector<store::MetricPoint>> history;  // key -> points by step
};

// The document the page draws, built from the runs alone: the static
// report embeds it, and a live page (`ipu ui`) is served it again to redraw.
// Besides the runs (id, name, label, tags, note, parameters, last metrics)
// and the charts, it names the parameters that differ (`labelParams`), what
// the runs can be grouped by (`groupBy`, and `defaultGroup`), and the
// metrics that never changed (`constantMetrics`, which get no chart).
nlohmann::json runsReportData(const std::vector<ReportRun>& runs);

struct PageOptions {
  // Empty: a static page. Otherwise the URL (relative to the page) the page
  // fetches every `pollMilliseconds` for runsReportData's document, redrawing
  // when it changed.
  std::string liveUrl;
  int pollMilliseconds = 2000;
  // The live page shows a fixed set of runs (not a filter new runs may
  // join): it stops asking once none of them is running.
  bool liveStopsWhenEnded = false;
};

// `title`: the page's heading; `source`: where the runs came from (the store).
std::string runsReportHtml(const std::vector<ReportRun>& runs, const std::string& title, const std::string& source,
                           const PageOptions& options = {});

// The number of run curves the report holds (one per run and metric with at
// least one finite point, constant metrics left out), for callers and tests
// to check against; grouped in the page, fewer are drawn.
std::size_t curveCount(const std::vector<ReportRun>& runs);

}  // namespace ipu::report
