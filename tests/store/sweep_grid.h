// The sweep the sweep-store tests and their agent driver (sweep_agent.cpp)
// run: a grid of 3 learning rates x 2 micro-batch sizes x 2 precisions = 12
// cells, and a grid proposer for it (the first cell, in the spec's order,
// that no trial has; the real proposers are sweep/propose.h's).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "interpreter/store/sweep_store.h"
#include "interpreter/sweep/space.h"

namespace ipu::testing {

inline sweep::SweepSpec gridSpec(const std::string& name) {
  using sweep::ParamValue;
  sweep::SweepSpec s;
  s.name = name;
  s.training = "tiny_pretrain";
  s.method = sweep::Method::Grid;
  s.metric.name = "loss";
  s.metric.goal = sweep::Goal::Minimize;
  sweep::ParamSpec lr;
  lr.path = "lr";
  lr.values = {ParamValue::ofNumber(0.001), ParamValue::ofNumber(0.003), ParamValue::ofNumber(0.01)};
  sweep::ParamSpec micro;
  micro.path = "phase.pretrain.micro_batch";
  micro.values = {ParamValue::ofInteger(2), ParamValue::ofInteger(4)};
  sweep::ParamSpec precision;
  precision.path = "precision.compute";
  precision.values = {ParamValue::ofName("fp16"), ParamValue::ofName("fp32")};
  s.parameters = {lr, micro, precision};  // sorted by path
  s.seed = 0xfedcba9876543210ULL;          // above 2^63: the store keeps all 64 bits
  return s;
}

// Every cell of a grid of `Values` parameters, the last parameter varying fastest.
inline std::vector<sweep::Assignment> gridCells(const sweep::SweepSpec& spec) {
  std::vector<sweep::Assignment> cells{{}};
  for (const auto& p : spec.parameters) {
    std::vector<sweep::Assignment> next;
    for (const auto& partial : cells)
      for (const auto& v : p.values) {
        auto a = partial;
        a.emplace_back(p.path, v);
        next.push_back(std::move(a));
      }
    cells = std::move(next);
  }
  return cells;
}

inline std::optional<sweep::Assignment> nextGridCell(const store::SweepRecord& sweep,
                                                     const std::vector<store::TrialRecord>& trials) {
  std::set<std::string> taken;
  for (const auto& t : trials) taken.insert(t.key);
  for (auto& cell : gridCells(sweep.spec))
    if (taken.count(sweep::assignmentKey(cell)) == 0) return cell;
  return std::nullopt;
}

// The "metric" a test trial reports: a function of its assignment, lowest
// (0.015) at lr 0.001, micro-batch 2, fp16.
inline double testMetric(const sweep::Assignment& a) {
  double m = 0;
  for (const auto& [path, v] : a) {
    if (path == "lr") m += v.number * 10;
    else if (path == "phase.pretrain.micro_batch") m += v.number / 400;
    else if (path == "precision.compute") m += v.text == "fp16" ? 0.0 : 1.0;
  }
  return m;
}

}  // namespace ipu::testing
