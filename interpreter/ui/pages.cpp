// The dashboard's pages (dashboard.h). The runs table and the list of sweeps
// are static pages (pages/*.html) drawn by their scripts from the JSON API.
// A run, a comparison and a sweep are the very pages `ipu report` writes
// (report/runs_html.h, report/sweep_html.h), made live and given the
// dashboard's navigation and one section of its own.
#include <nlohmann/json.hpp>

#include "interpreter/report/html_text.h"
#include "interpreter/report/runs_html.h"
#include "interpreter/report/sweep_html.h"
#include "interpreter/store/run_store.h"
#include "interpreter/ui/assets.h"
#include "interpreter/ui/dashboard.h"
#include "interpreter/ui/requests.h"

namespace ipu::ui {

namespace {

const char* kHtml = "text/html; charset=utf-8";

// Its message (a JSON reply's "error") as a page, with the same status.
Reply htmlError(const Reply& reply) {
  std::string message = reply.body;
  auto j = nlohmann::json::parse(reply.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) message = j["error"].get<std::string>();
  return {reply.status, kHtml,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ipu ui: error " +
              std::to_string(reply.status) + "</title><link rel=\"stylesheet\" href=\"/static/ui.css\"></head><body>\n" +
              "<nav class=\"ui-nav\"><a href=\"/\">runs</a> <a href=\"/sweeps\">sweeps</a></nav>\n<h1>Error " +
              std::to_string(reply.status) + "</h1>\n<p class=\"ui-error\">" + report::escapeHtml(message) + "</p>\n</body></html>\n"};
}

// A report page with the dashboard's navigation at the top of its body and
// `section` (markup and scripts of the dashboard) at its end, after the
// report's own script.
std::string withDashboard(std::string html, const std::string& section) {
  const std::string nav =
      "<link rel=\"stylesheet\" href=\"/static/ui.css\">\n"
      "<nav class=\"ui-nav\"><a href=\"/\">runs</a> <a href=\"/sweeps\">sweeps</a> <span class=\"ui-live\">live</span></nav>\n";
  const auto body = html.find("<body");
  const auto open = body == std::string::npos ? std::string::npos : html.find('>', body);
  if (open != std::string::npos) html.insert(open + 1, "\n" + nav);
  const auto close = html.rfind("</body>");
  html.insert(close == std::string::npos ? html.size() : close, section);
  return html;
}

std::string idsText(const std::vector<store::RunRecord>& runs) {
  std::string ids;
  for (const auto& r : runs) ids += (ids.empty() ? "" : ",") + std::to_string(r.id);
  return ids;
}

}  // namespace

Reply Dashboard::runsPage() const { return {200, kHtml, assets::runsPage()}; }
Reply Dashboard::sweepsPage() const { return {200, kHtml, assets::sweepsPage()}; }

Reply Dashboard::asset(const std::string& name) const {
  if (name == "ui.css") return {200, "text/css; charset=utf-8", assets::style()};
  const char* js = "text/javascript; charset=utf-8";
  if (name == "runs.js") return {200, js, assets::runsScript()};
  if (name == "sweeps.js") return {200, js, assets::sweepsScript()};
  if (name == "details.js") return {200, js, assets::detailsScript()};
  if (name == "sweep_live.js") return {200, js, assets::sweepLiveScript()};
  if (name == "errors.js") return {200, js, assets::errorsScript()};
  if (name == "common.js") return {200, js, assets::commonScript()};
  return htmlError(errorReply(404, "there is no file `/static/" + name + "`"));
}

namespace {

// The report page of `runs`, live: it asks /api/report-data for them again.
Reply runsPageOf(store::RunStore& st, std::vector<store::RunRecord> records, const std::string& title, int pollMs) {
  const std::string ids = idsText(records);
  std::vector<report::ReportRun> runs;
  for (auto& r : records) {
    report::ReportRun rr;
    for (auto& p : st.metricCurves(r.id, report::kMaxPointsPerCurve)) rr.history[p.key].push_back(std::move(p));
    rr.record = std::move(r);
    runs.push_back(std::move(rr));
  }
  report::PageOptions options;
  options.liveUrl = "/api/report-data?ids=" + ids;
  options.pollMilliseconds = pollMs;
  options.liveStopsWhenEnded = true;   // these runs, by id
  const std::string section =
      "<section id=\"ui-details\" data-ids=\"" + report::escapeHtml(ids) + "\" data-poll-ms=\"" + std::to_string(pollMs) +
      "\"></section>\n<script src=\"/static/common.js\"></script>\n<script src=\"/static/details.js\"></script>\n";
  return {200, kHtml, withDashboard(report::runsReportHtml(runs, title, st.location(), options), section)};
}

}  // namespace

Reply Dashboard::runPage(const std::string& id) const {
  Reply reply = guarded([&]() -> Reply {
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto r = store::findRun(*st, id);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st->location() + "`");
    const std::string title = "run " + std::to_string(r->id) + ": " + r->name;
    return runsPageOf(*st, {*r}, title, pollMilliseconds_);
  });
  return reply.contentType == kHtml ? reply : htmlError(reply);
}

Reply Dashboard::comparePage(const Query& q) const {
  Reply reply = guarded([&]() -> Reply {
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto found = findRuns(*st, nullptr, q);
    if (auto* error = std::get_if<Reply>(&found)) return *error;
    auto& runs = std::get<std::vector<store::RunRecord>>(found);
    const std::string title = "comparison of " + std::to_string(runs.size()) + " run" + (runs.size() == 1 ? "" : "s");
    return runsPageOf(*st, std::move(runs), title, pollMilliseconds_);
  });
  return reply.contentType == kHtml ? reply : htmlError(reply);
}

Reply Dashboard::sweepPage(const std::string& name) const {
  Reply reply = guarded([&]() -> Reply {
    auto built = sweepReport(store_, name);
    if (auto* error = std::get_if<Reply>(&built)) return *error;
    const auto& r = std::get<report::SweepReport>(built);
    const std::string section = "<div id=\"ui-sweep\" data-sweep=\"" + report::escapeHtml(r.sweep.name) + "\" data-poll-ms=\"" +
                                std::to_string(pollMilliseconds_) + "\"></div>\n<script src=\"/static/common.js\"></script>\n<script src=\"/static/sweep_live.js\"></script>\n";
    return {200, kHtml, withDashboard(report::sweepReportHtml(r, "sweep " + r.sweep.name), section)};
  });
  return reply.contentType == kHtml ? reply : htmlError(reply);
}

}  // namespace ipu::ui
