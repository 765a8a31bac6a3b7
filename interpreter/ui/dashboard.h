// What `ipu ui` answers (docs/tracking.md, "Live dashboard: ipu ui"), apart
// from HTTP: each request of the JSON API and each page is a call here that
// opens the run store, reads what it needs and returns a reply. The server
// (server.h) only routes, and checks who may ask (token, host, origin).
//
// The store is opened again for every request: a reader of an SQLite store in
// WAL mode sees each commit of an `ipu run` writing it meanwhile, a
// PostgreSQL connection that dropped is simply made again, and requests
// served on different threads share nothing.
//
// Replies never throw: a bad query parameter is 400, an unknown run or sweep
// 404, a refused write 403, a store that cannot be read 503, each with a
// JSON body {"error": "..."} saying what is wrong.
#pragma once

#include <map>
#include <string>

namespace ipu::ui {

// Query parameters, as parsed from the URL (a name given twice: the first).
using Query = std::multimap<std::string, std::string>;

struct Reply {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
};

class Dashboard {
 public:
  // `store`: as `openStore` takes it. `writable`: whether tags and notes may
  // be changed from the page. `pollMilliseconds`: how often live pages ask
  // again.
  Dashboard(std::string store, bool writable, int pollMilliseconds);

  // ---- the JSON API (api.cpp), documented in docs/tracking.md as a contract
  Reply config() const;                                    // GET /api/config
  Reply runs(const Query& q) const;                        // GET /api/runs?where=&sort=&limit=&columns=
  Reply run(const std::string& id) const;                  // GET /api/runs/ID
  Reply metrics(const std::string& id, const Query& q) const;  // GET /api/runs/ID/metrics?since=N&key=K
  Reply reportData(const Query& q) const;                  // GET /api/report-data?ids=1,2
  Reply comparison(const Query& q) const;                  // GET /api/compare?ids=1,2
  Reply sweeps() const;                                    // GET /api/sweeps
  Reply sweep(const std::string& name) const;              // GET /api/sweeps/NAME
  Reply changeTags(const std::string& id, const std::string& body) const;  // POST /api/runs/ID/tags
  Reply setNote(const std::string& id, const std::string& body) const;     // POST /api/runs/ID/note

  // ---- pages (pages.cpp)
  Reply runsPage() const;                          // GET /
  Reply runPage(const std::string& id) const;      // GET /runs/ID
  Reply comparePage(const Query& q) const;         // GET /compare?ids=1,2
  Reply sweepsPage() const;                        // GET /sweeps
  Reply sweepPage(const std::string& name) const;  // GET /sweeps/NAME
  // GET /static/NAME: the pages' scripts and style; 404 for another name.
  Reply asset(const std::string& name) const;

  bool writable() const { return writable_; }

 private:
  std::string store_;
  bool writable_;
  int pollMilliseconds_;
};

// A JSON reply {"error": message} with `status`.
Reply errorReply(int status, const std::string& message);

}  // namespace ipu::ui
