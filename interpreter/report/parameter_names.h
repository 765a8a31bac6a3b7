// How the reports name a parameter where room is short (a legend entry, a
// hover title): the shortest ending of its path that no other parameter in
// view shares, a short last part kept with the one before it, so that
// `phases.short.lr.peak` reads `lr.peak` and `mapping.replicas` `replicas`.
#pragma once

#include <string>
#include <vector>

namespace ipu::report {

// `others`: the parameters shown beside `key` (`key` may be among them).
std::string shortParameterName(const std::string& key, const std::vector<std::string>& others);

}  // namespace ipu::report
