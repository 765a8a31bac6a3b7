#include "interpreter/report/parameter_names.h"

#include <algorithm>

namespace ipu::report {

std::string shortParameterName(const std::string& key, const std::vector<std::string>& others) {
  std::vector<std::size_t> dots;
  for (std::size_t i = 0; i < key.size(); ++i)
    if (key[i] == '.') dots.push_back(i);
  const std::size_t parts = dots.size() + 1;
  const std::size_t leaf = key.size() - (dots.empty() ? 0 : dots.back() + 1);
  for (std::size_t take = leaf <= 4 ? 2 : 1; take < parts; ++take) {
    const std::string tail = key.substr(dots[parts - 1 - take] + 1);
    const bool shared = std::any_of(others.begin(), others.end(), [&](const std::string& o) {
      return o != key && (o == tail || (o.size() > tail.size() && o.compare(o.size() - tail.size(), tail.size(), tail) == 0 &&
                                        o[o.size() - tail.size() - 1] == '.'));
    });
    if (!shared) return tail;
  }
  return key;
}

}  // namespace ipu::report
