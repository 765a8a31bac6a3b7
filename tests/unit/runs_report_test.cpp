// runsReportData (interpreter/report/runs_html.h): the document the runs
// report draws. Runs are made in memory here; the page that draws the
// document is tested in Chromium (tests/store/report_page_test.js).
#include <gtest/gtest.h>

#include <cmath>

#include "interpreter/report/runs_html.h"

namespace ipu::report {
namespace {

ReportRun makeRun(long long id, std::map<std::string, std::string> params, const std::string& name = "") {
  ReportRun r;
  r.record.id = id;
  r.record.training = "tiny_pretrain";
  r.record.name = name.empty() ? "tiny_pretrain-" + std::to_string(id) : name;
  r.record.kind = store::RunKind::Run;
  r.record.status = store::RunStatus::Finished;
  r.record.parameters = std::move(params);
  return r;
}

void addCurve(ReportRun& r, const std::string& key, long long steps, double (*f)(long long, long long), long long first = 1) {
  for (long long s = first; s <= steps; ++s) r.history[key].push_back({key, s, f(s, r.record.id), 0});
  r.record.metrics[key].last = r.history[key].back().value;
}

double falling(long long s, long long id) { return 8.0 / static_cast<double>(s + id); }
double scale(long long, long long) { return 1024; }
double zero(long long, long long) { return 0; }
double perRun(long long, long long id) { return static_cast<double>(id); }

// Three runs of three learning rates (a phase's base and peak set together),
// the same replicas.
std::vector<ReportRun> threeRates() {
  std::vector<ReportRun> runs;
  const char* rates[] = {"0.02", "0.01", "0.005"};
  for (long long i = 0; i < 3; ++i) {
    runs.push_back(makeRun(i + 1, {{"phases.short.lr.peak", rates[i]}, {"phases.short.lr.base", rates[i]}, {"mapping.replicas", "2"}}));
    addCurve(runs.back(), "loss", 20, falling);
    addCurve(runs.back(), "loss_scale", 20, scale);
    addCurve(runs.back(), "skipped", 20, zero);
    addCurve(runs.back(), "level", 20, perRun);
  }
  return runs;
}

const nlohmann::json* chartOf(const nlohmann::json& data, const std::string& key) {
  for (const auto& c : data["charts"])
    if (c["key"] == key) return &c;
  return nullptr;
}

TEST(RunsReportData, LabelsNameWhatDiffers) {
  const auto data = runsReportData(threeRates());
  // lr.base and lr.peak split the runs alike: one names them; replicas is the same for all.
  ASSERT_EQ(data["labelParams"].size(), 1u) << data["labelParams"].dump();
  EXPECT_EQ(data["labelParams"][0]["name"], "lr.base");
  EXPECT_EQ(data["runs"][0]["label"], "#1 lr.base=0.02");
  EXPECT_EQ(data["runs"][2]["label"], "#3 lr.base=0.005");
  EXPECT_FALSE(data["runs"][0]["named"].get<bool>());
}

TEST(RunsReportData, LabelsUseGivenNamesAndKinds) {
  auto runs = threeRates();
  runs[1].record.name = "warm-start";
  runs[2].record.kind = store::RunKind::Estimate;
  const auto data = runsReportData(runs);
  EXPECT_EQ(data["runs"][1]["label"], "#2 warm-start");
  EXPECT_TRUE(data["runs"][1]["named"].get<bool>());
  EXPECT_EQ(data["runs"][2]["label"], "#3 lr.base=0.005 (estimate)");
  // Nothing differs: the training names the run.
  const auto one = runsReportData({makeRun(7, {{"mapping.replicas", "2"}})});
  EXPECT_EQ(one["runs"][0]["label"], "#7 tiny_pretrain");
}

TEST(RunsReportData, ShortNamesStayUnambiguous) {
  std::vector<ReportRun> runs;
  runs.push_back(makeRun(1, {{"phases.short.lr.peak", "0.1"}, {"phases.long.lr.peak", "0.5"}, {"mapping.replicas", "1"}}));
  runs.push_back(makeRun(2, {{"phases.short.lr.peak", "0.2"}, {"phases.long.lr.peak", "0.5"}, {"mapping.replicas", "2"}}));
  runs.push_back(makeRun(3, {{"phases.short.lr.peak", "0.2"}, {"phases.long.lr.peak", "0.7"}, {"mapping.replicas", "1"}}));
  const auto data = runsReportData(runs);
  std::vector<std::string> names;
  for (const auto& p : data["labelParams"]) names.push_back(p["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"long.lr.peak", "replicas", "short.lr.peak"}));
  EXPECT_EQ(data["runs"][2]["label"], "#3 long.lr.peak=0.7, replicas=1, short.lr.peak=0.2");
}

TEST(RunsReportData, ConstantMetricsAreFolded) {
  const auto runs = threeRates();
  const auto data = runsReportData(runs);
  std::map<std::string, double> constants;
  for (const auto& c : data["constantMetrics"]) constants[c["key"]] = c["value"];
  EXPECT_EQ(constants, (std::map<std::string, double>{{"loss_scale", 1024}, {"skipped", 0}}));
  EXPECT_EQ(chartOf(data, "loss_scale"), nullptr);
  EXPECT_EQ(chartOf(data, "skipped"), nullptr);
  // Constant in each run but not across them: a chart.
  ASSERT_NE(chartOf(data, "level"), nullptr);
  ASSERT_NE(chartOf(data, "loss"), nullptr);
  for (const auto& m : data["tableMetrics"]) EXPECT_NE(m, "loss_scale");
  EXPECT_FALSE(data["runs"][0]["metrics"].contains("skipped"));
  EXPECT_EQ(curveCount(runs), 6u);  // loss and level, three runs each
}

TEST(RunsReportData, OnePointIsNotAConstant) {
  auto runs = threeRates();
  runs.resize(1);
  addCurve(runs[0], "eval.loss", 1, falling);
  const auto data = runsReportData(runs);
  EXPECT_NE(chartOf(data, "eval.loss"), nullptr);
  for (const auto& c : data["constantMetrics"]) EXPECT_NE(c["key"], "eval.loss");
}

TEST(RunsReportData, TagsAndNotes) {
  auto runs = threeRates();
  runs[0].record.tags = {"baseline", "small"};
  runs[1].record.note = "diverged after <b>warm-up</b>";
  const auto data = runsReportData(runs);
  EXPECT_EQ(data["runs"][0]["tags"], (nlohmann::json{"baseline", "small"}));
  EXPECT_EQ(data["runs"][1]["note"], "diverged after <b>warm-up</b>");
  EXPECT_EQ(data["runs"][2]["tags"], nlohmann::json::array());
}

// 4 learning rates x 2 replica counts x seeds: grouped by the grid point past
// kDistinguishableRuns runs, and by nothing below it.
std::vector<ReportRun> grid(long long n) {
  std::vector<ReportRun> runs;
  const char* rates[] = {"0.005", "0.01", "0.02", "0.04"};
  for (long long i = 0; i < n; ++i) {
    runs.push_back(makeRun(i + 1, {{"phases.short.lr.peak", rates[i % 4]}, {"mapping.replicas", std::to_string(1 + (i / 4) % 2)},
                                   {"seed", std::to_string(1 + i / 8)}}));
    addCurve(runs.back(), "loss", 10, falling);
  }
  runs[0].record.tags = {"baseline"};
  runs[1].record.tags = {"baseline"};
  return runs;
}

TEST(RunsReportData, GroupingChoices) {
  const auto many = runsReportData(grid(40));
  std::map<std::string, std::size_t> groups;
  for (const auto& g : many["groupBy"]) groups[g["id"]] = g["groups"];
  // The grid points (the parameters but the seed), each parameter, the tags.
  EXPECT_EQ(groups, (std::map<std::string, std::size_t>{{"p:phases.short.lr.peak|mapping.replicas", 8},
                                                        {"p:mapping.replicas", 2},
                                                        {"p:phases.short.lr.peak", 4},
                                                        {"p:seed", 5},
                                                        {"#tags", 2}}))
      << many["groupBy"].dump();
  EXPECT_EQ(many["groupBy"][0]["names"], (nlohmann::json{"lr.peak", "replicas"}));
  // 40 runs: grouped by default, by the grid point.
  EXPECT_EQ(many["defaultGroup"], "p:phases.short.lr.peak|mapping.replicas");
  for (const auto& r : many["runs"]) EXPECT_TRUE(r["params"].contains("phases.short.lr.peak")) << r.dump();
  // Few runs are drawn one by one.
  EXPECT_EQ(runsReportData(grid(8))["defaultGroup"], "");
  // Every run different in everything: nothing to group by but tags.
  auto unique = grid(24);
  for (auto& r : unique) r.record.parameters["seed"] = std::to_string(r.record.id);
  for (auto& r : unique) r.record.parameters["phases.short.lr.peak"] = std::to_string(r.record.id);
  for (auto& r : unique) r.record.parameters["mapping.replicas"] = "1";
  const auto apart = runsReportData(unique);
  ASSERT_EQ(apart["groupBy"].size(), 1u) << apart["groupBy"].dump();
  EXPECT_EQ(apart["defaultGroup"], "#tags");
}

TEST(RunsReportData, CurvesShareOneThinnedGrid) {
  std::vector<ReportRun> runs;
  for (long long i = 0; i < 3; ++i) {
    runs.push_back(makeRun(i + 1, {{"seed", std::to_string(i)}}));
    addCurve(runs.back(), "loss", 10000 + 3000 * i, falling, 1 + i);  // unaligned starts, different lengths
  }
  const auto data = runsReportData(runs);
  const auto* loss = chartOf(data, "loss");
  ASSERT_NE(loss, nullptr);
  const std::size_t columns = (*loss)["steps"].size();
  EXPECT_LE(columns, kMaxPointsPerCurve);
  EXPECT_GE(columns, kMaxPointsPerCurve / 2);
  for (const auto& s : (*loss)["series"]) EXPECT_EQ(s["values"].size(), columns);
  // Every bucket of the longest run has a value; the shorter ones end with nulls.
  for (const auto& v : (*loss)["series"][2]["values"]) EXPECT_FALSE(v.is_null());
  EXPECT_TRUE((*loss)["series"][0]["values"].back().is_null());
  // Values are kept to six significant digits (8/3 = 2.66667, not 2.6666666666666665).
  auto one = makeRun(1, {});
  one.history["loss"] = {{"loss", 1, 8.0 / 3, 0}, {"loss", 2, 1.0, 0}};
  EXPECT_EQ(runsReportData({one})["charts"][0]["series"][0]["values"][0].dump(), "2.66667");
  const std::pair<double, const char*> cases[] = {{1234567.89, "1234570.0"}, {-0.000123456789, "-0.000123457"},
                                                  {1.23456789e-7, "1.23457e-07"}, {6.0221e23, "6.0221e+23"}, {0.0, "0.0"}};
  for (const auto& [value, text] : cases) {
    one.history["loss"] = {{"loss", 1, value, 0}, {"loss", 2, 1.0, 0}};
    EXPECT_EQ(runsReportData({one})["charts"][0]["series"][0]["values"][0].dump(), text) << value;
  }
}

}  // namespace
}  // namespace ipu::report
