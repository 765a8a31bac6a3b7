// A real PostgreSQL server for the store tests: initdb into a temporary
// directory, listening only on a Unix socket in that directory (no TCP port
// to collide with), started and stopped by the test process. PostgreSQL
// refuses to run as root, so under root the server runs as `nobody` (via
// runuser), owning only its temporary directory.
#pragma once

#include <string>

namespace ipu::testing {

class PostgresServer {
 public:
  // Starts the server; on failure `error()` says why and uri() is empty.
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  bool running() const { return !uri_.empty(); }
  const std::string& error() const { return error_; }
  // A URI for database `db` (created by createDatabase, or "postgres").
  std::string uri(const std::string& db = "postgres") const;
  // Creates a fresh, empty database and returns its URI.
  std::string createDatabase();

 private:
  bool run(const std::string& command);  // as the server's user
  std::string dir_, bin_, asUser_, uri_, error_;
  int databases_ = 0;
};

// The one server of a test process, started on first use, stopped at exit.
PostgresServer& postgresServer();

}  // namespace ipu::testing
