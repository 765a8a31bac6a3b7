// The HTML report of recorded runs (`ipu report`, docs/tracking.md): one
// self-contained file, with no network access and no file beside it, so it
// works offline and can be mailed. It holds
//   - every metric's curve over steps, the selected runs overlaid, the run
//     names in the legend, hover showing the values (uPlot, embedded:
//     third_party/uplot);
//   - the parameter table (the parameters that differ, and key metrics);
//   - for three runs or more, a parallel-coordinates plot (numeric
//     parameters that differ, then a metric) and a scatter of any metric
//     against any parameter (chosen in the page), drawn as SVG with hover.
// The data travel as one JSON document inside the page; curves longer than
// kMaxPointsPerCurve points are thinned by averaging neighbouring points, so
// a report of long runs stays small and quick to open.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::report {

constexpr std::size_t kMaxPointsPerCurve = 2000;

struct ReportRun {
  store::RunRecord record;
  std::map<std::string, std::vector<store::MetricPoint>> history;  // key -> points by step
};

// The document the page draws, built from the runs alone: the static
// report embeds it, and a live page (`ipu ui`) is served it again to redraw.
nlohmann::json runsReportData(const std::vector<ReportRun>& runs);

struct PageOptions {
  // Empty: a static page. Otherwise the URL (relative to the page) the page
  // fetches every `pollMilliseconds` for runsReportData's document, redrawing
  // when it changed.
  std::string liveUrl;
  int pollMilliseconds = 2000;
};

// `title`: the page's heading; `source`: where the runs came from (the store).
std::string runsReportHtml(const std::vector<ReportRun>& runs, const std::string& title, const std::string& source,
                           const PageOptions& options = {});

// The number of curves the report draws (one per run and metric with at
// least one finite point), for callers and tests to check against.
std::size_t curveCount(const std::vector<ReportRun>& runs);

}  // namespace ipu::report
