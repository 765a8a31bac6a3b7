#include "tests/store/postgres_server.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"

namespace ipu::testing {

namespace fs = std::filesystem;

namespace {

// /usr/lib/postgresql/<version>/bin with initdb, the newest version.
std::string findBin() {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec))
    if (fs::exists(e.path() / "bin" / "initdb")) found.push_back(e.path() / "bin");
  if (found.empty()) return {};
  std::sort(found.begin(), found.end());
  return found.back().string();
}

}  // namespace

PostgresServer::PostgresServer() {
  bin_ = findBin();
  if (bin_.empty()) {
    error_ = "no PostgreSQL server binaries under /usr/lib/postgresql (Debian package `postgresql`; ./dev installs it)";
    return;
  }
  char tmpl[] = "/tmp/ipu-pg-XXXXXX";  // short: a Unix socket path has a length limit
  if (::mkdtemp(tmpl) == nullptr) {
    error_ = "cannot create a temporary directory";
    return;
  }
  dir_ = tmpl;
  if (::geteuid() == 0) {
    struct passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr || ::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      error_ = "running as root, and cannot hand " + dir_ + " to user nobody";
      return;
    }
    asUser_ = "nobody";
  }
  if (!run(bin_ + "/initdb -D " + dir_ + "/data -U ipu --auth=trust -E UTF8 --no-sync >" + dir_ + "/initdb.log 2>&1")) {
    error_ = "initdb failed (see " + dir_ + "/initdb.log)";
    return;
  }
  if (!run(bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -t 60 -o \"-k " + dir_ +
           " -c listen_addresses='' -c fsync=off\" start >/dev/null 2>&1")) {
    error_ = "the server did not start (see " + dir_ + "/server.log)";
    return;
  }
  uri_ = uri();
}

PostgresServer::~PostgresServer() {
  if (!dir_.empty()) {
    if (!uri_.empty()) run(bin_ + "/pg_ctl -D " + dir_ + "/data -m fast -w stop >/dev/null 2>&1");
    std::error_code ec;
    if (error_.empty()) fs::remove_all(dir_, ec);  // kept when it failed, for its logs
  }
}

bool PostgresServer::run(const std::string& command) {
  std::string full = asUser_.empty() ? command : "runuser -u " + asUser_ + " -- sh -c '" + [&] {
    std::string quoted;
    for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted;
  }() + "'";
  return std::system(full.c_str()) == 0;
}

std::string PostgresServer::uri(const std::string& db) const {
  return "postgresql://ipu@/" + db + "?host=" + dir_;
}

std::string PostgresServer::createDatabase() {
  std::string name = "store_test_" + std::to_string(++databases_);
  auto admin = store::connectPostgres(uri());
  admin->execute("DROP DATABASE IF EXISTS " + name);
  admin->execute("CREATE DATABASE " + name);
  return uri(name);
}

PostgresServer& postgresServer() {
  // Destroyed at exit, which stops the server.
  static PostgresServer server;
  return server;
}

}  // namespace ipu::testing
