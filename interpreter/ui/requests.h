// What the API (api.cpp) and the pages (pages.cpp) of the dashboard share:
// reading query parameters, finding the runs a request names, building a
// sweep's report, and turning a store's failure into a reply.
#pragma once

#include <exception>
#include <string>
#include <variant>
#include <vector>

#include "interpreter/report/sweep_html.h"
#include "interpreter/store/run_store.h"
#include "interpreter/ui/dashboard.h"

namespace ipu::ui {

// The value of a query parameter ("" when absent).
std::string param(const Query& q, const std::string& name);

// The runs of `?ids=3,5,tiny-7` (ids or names, in that order, each once), or
// the reply saying what is wrong (400: none or too many; 404: no such run).
// `all`: the store's listRuns() when the caller has it (a name is looked up
// there); null: runs named by id are read alone, without listing the store.
std::variant<std::vector<store::RunRecord>, Reply> findRuns(store::RunStore& st, const std::vector<store::RunRecord>* all,
                                                            const Query& q);

// The report of the sweep `name` (404 when the store has none of that name).
std::variant<report::SweepReport, Reply> sweepReport(const std::string& location, const std::string& name);

// Runs `answer`; a store that cannot be read (gone, locked past its timeout,
// a server down) becomes 503 with the store's message, anything else 500:
// a request never ends the server.
template <class Answer>
Reply guarded(Answer answer) {
  try {
    return answer();
  } catch (const store::StoreError& e) {
    return errorReply(503, std::string("the store cannot be read: ") + e.what());
  } catch (const std::exception& e) {
    return errorReply(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace ipu::ui
