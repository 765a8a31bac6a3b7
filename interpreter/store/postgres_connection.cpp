// PostgreSQL behind SqlConnection, through libpq. Parameters travel as text
// (numbers with 17 significant digits, so doubles round-trip exactly) and
// the server infers their types from the columns. A batch of inserts becomes
// multi-row INSERTs of up to 1,000 rows, one round trip each.
#include <libpq-fe.h>
#include <libpq/libpq-fs.h>
#include <poll.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"

namespace ipu::store {

namespace {

constexpr std::size_t kRowsPerInsert = 1000;

// `?` -> `$1`, `$2`, ... counting from `first` (our SQL has no `?` in literals).
std::string numberPlaceholders(const std::string& sql, int& next) {
  std::string out;
  out.reserve(sql.size() + 16);
  for (char c : sql) {
    if (c == '?') out += "$" + std::to_string(next++);
    else out += c;
  }
  return out;
}

std::optional<std::string> asText(const SqlValue& v) {
  if (std::holds_alternative<std::nullptr_t>(v)) return std::nullopt;
  if (const auto* n = std::get_if<long long>(&v)) return std::to_string(*n);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", *d);
    return std::string(buf);
  }
  return std::get<std::string>(v);
}

std::string percentDecoded(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The secrets a store URI may carry: the password of its user part and the
// value of a `password` parameter, as written and percent-decoded.
std::vector<std::string> secretsOf(const std::string& uri) {
  std::vector<std::string> out;
  auto add = [&](const std::string& s) {
    if (s.empty()) return;
    out.push_back(s);
    if (const std::string d = percentDecoded(s); d != s && !d.empty()) out.push_back(d);
  };
  const auto scheme = uri.find("://");
  if (scheme != std::string::npos) {
    const std::size_t start = scheme + 3;
    // As libpq reads it: the user part ends at the first `@` before any `/`
    // (a `?` does not end it: `user:pw?x@host` has the password `pw?x`).
    std::size_t p = start;
    while (p < uri.size() && uri[p] != '@' && uri[p] != '/') ++p;
    if (p < uri.size() && uri[p] == '@') {
      const std::size_t colon = uri.find(':', start);
      if (colon != std::string::npos && colon < p) add(uri.substr(colon + 1, p - colon - 1));
    }
    // And up to the last `@` before the path or parameters (a password with `@` in it).
    const std::size_t end = std::min(uri.find_first_of("/?", start), uri.size());
    const std::size_t at = uri.rfind('@', end == uri.size() ? std::string::npos : end);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = uri.find(':', start);
      if (colon != std::string::npos && colon < at) add(uri.substr(colon + 1, at - colon - 1));
    }
  }
  // Parameters as libpq reads them: `&`-separated after a `?`, the key
  // percent-decoded (`pass%77ord=`), the value whole (spaces too).
  for (std::size_t p = uri.find_first_of("?&"); p != std::string::npos; p = uri.find_first_of("?&", p + 1)) {
    const std::size_t end = std::min(uri.find('&', p + 1), uri.size());
    const std::string parameter = uri.substr(p + 1, end - p - 1);
    const std::size_t eq = parameter.find('=');
    if (eq != std::string::npos && percentDecoded(parameter.substr(0, eq)) == "password") add(parameter.substr(eq + 1));
  }
  // And whatever libpq itself finds to be the password of a URI.
  if (isPostgresLocation(uri)) {
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(uri.c_str(), &error);
    PQfreemem(error);
    for (PQconninfoOption* o = parsed; o != nullptr && o->keyword != nullptr; ++o)
      if (std::string(o->keyword) == "password" && o->val != nullptr) add(o->val);
    PQconninfoFree(parsed);
  }
  // Longest first, so a secret inside another is not left half shown.
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

// `text` with every secret of the URI replaced by ***: what may be printed.
std::string scrubbed(std::string text, const std::vector<std::string>& secrets) {
  for (const std::string& s : secrets)
    for (std::size_t p = text.find(s); p != std::string::npos; p = text.find(s, p + 3)) text.replace(p, s.size(), "***");
  return text;
}

// Milliseconds of a PostgreSQL duration setting ("60000", "5s", "2min", "1.5h"):
// a bare number is milliseconds, as the server reads statement_timeout.
std::optional<double> durationMs(const std::string& text) {
  char* end = nullptr;
  const double n = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(n >= 0)) return std::nullopt;
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  if (unit.empty() || unit == "ms") return n;
  if (unit == "us") return n / 1000;
  if (unit == "s") return n * 1000;
  if (unit == "min") return n * 60000;
  if (unit == "h") return n * 3600000;
  if (unit == "d") return n * 86400000;
  return std::nullopt;
}

// The statement_timeout the libpq `options` of a URI set
// (`-c statement_timeout=5s`, `--statement_timeout=5s`), if any.
std::optional<std::string> statementTimeoutOption(const std::string& options) {
  for (const char* form : {"statement_timeout=", "statement-timeout="}) {
    const std::size_t at = options.rfind(form);
    if (at == std::string::npos) continue;
    const std::size_t v = at + std::string(form).size();
    return options.substr(v, std::min(options.find(' ', v), options.size()) - v);
  }
  return std::nullopt;
}

// The URI's own `options` parameter ("" when none or when it does not parse:
// connecting then says why).
std::string optionsOf(const std::string& uri) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(uri.c_str(), &error);
  PQfreemem(error);
  std::string out;
  for (PQconninfoOption* o = parsed; o != nullptr && o->keyword != nullptr; ++o)
    if (std::string(o->keyword) == "options" && o->val != nullptr) out = o->val;
  PQconninfoFree(parsed);
  return out;
}

class PostgresConnection : public SqlConnection {
 public:
  explicit PostgresConnection(const std::string& uri) : secrets_(secretsOf(uri)), uri_(scrubbed(uri, secrets_)) {
    // A server that accepts and never answers must not hang the command:
    // 10 s to connect unless the URI says otherwise (its own parameters,
    // expanded after this default, override it); and every statement ends
    // within the statement timeout (kStatementTimeout unless the URI's
    // `options` set statement_timeout), the server cancelling it, or this
    // process giving up kAnswerMargin later on a server that does not answer.
    std::string options = optionsOf(uri);
    const std::optional<std::string> given = statementTimeoutOption(options);
    statementTimeout_ = given.value_or(std::to_string(kStatementTimeoutMs) + "ms");
    const std::optional<double> ms = durationMs(statementTimeout_);
    if (!given) options += std::string(options.empty() ? "" : " ") + "-c statement_timeout=" + statementTimeout_;
    if (ms && *ms > 0) answerWithin_ = std::chrono::milliseconds(static_cast<long long>(*ms) + kAnswerMarginMs);
    const char* keywords[] = {"connect_timeout", "dbname", "options", nullptr};
    const char* values[] = {"10", uri.c_str(), options.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      std::string why = conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      // libpq's message may quote the URI, password and all.
      throw StoreError("cannot connect to `" + uri_ + "`: " + scrubbed(trimmed(why), secrets_));
    }
    // Notices (e.g. "relation already exists, skipping") are not for the user.
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    PQsetnonblocking(conn_, 1);
  }
  ~PostgresConnection() override { PQfinish(conn_); }
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  SqlDialect dialect() const override { return SqlDialect::Postgres; }

  void execute(const std::string& sql) override {
    PQclear(roundTrip([&] { return PQsendQuery(conn_, sql.c_str()); }));
  }

  std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    int next = 1;
    std::string text = numberPlaceholders(sql, next);
    std::vector<std::optional<std::string>> values;
    for (const auto& p : params) values.push_back(asText(p));
    PGresult* r = run(text, values);
    std::vector<SqlRow> rows;
    int n = PQntuples(r), m = PQnfields(r);
    rows.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      SqlRow row(static_cast<std::size_t>(m));
      for (int j = 0; j < m; ++j)
        if (PQgetisnull(r, i, j) == 0) row[static_cast<std::size_t>(j)] = std::string(PQgetvalue(r, i, j));
      rows.push_back(std::move(row));
    }
    PQclear(r);
    return rows;
  }

  void executeMany(const std::string& sql, const std::vector<std::vector<SqlValue>>& rows) override {
    if (rows.empty()) return;
    // "INSERT ... VALUES (?, ?, ?)" -> "INSERT ... VALUES ($1,$2,$3), ($4,$5,$6), ..."
    auto at = sql.rfind("VALUES");
    if (at == std::string::npos) {
      for (const auto& row : rows) query(sql, row);
      return;
    }
    const std::string head = sql.substr(0, at + 6), tuple = sql.substr(at + 6);
    for (std::size_t start = 0; start < rows.size(); start += kRowsPerInsert) {
      std::size_t end = std::min(rows.size(), start + kRowsPerInsert);
      std::string text = head;
      std::vector<std::optional<std::string>> values;
      int next = 1;
      for (std::size_t i = start; i < end; ++i) {
        text += (i == start ? "" : ",") + numberPlaceholders(tuple, next);
        for (const auto& p : rows[i]) values.push_back(asText(p));
      }
      PQclear(run(text, values));
    }
  }

  // Large objects (libpq's lo_* calls) are written and read in chunks, each
  // call one round trip. libpq makes those calls blocking whatever the
  // connection's mode (a non-blocking connection could leave one half
  // sent), so the connection is blocking for their while; the server's
  // statement timeout still bounds each.
  long long writeContent(std::uint64_t size, const ChunkSource& source) override {
    BlockingWhile blocking(*this);
    const Oid oid = lo_creat(conn_, INV_READ | INV_WRITE);
    if (oid == InvalidOid) largeObjectFailed("cannot create a large object");
    const int fd = lo_open(conn_, oid, INV_WRITE);
    if (fd < 0) largeObjectFailed("cannot open large object " + std::to_string(oid));
    std::vector<char> buffer(kContentChunkBytes);
    std::uint64_t at = 0;
    for (;;) {
      const std::size_t n = source(buffer.data(), buffer.size());
      if (n == 0) break;
      if (at + n > size)
        throw StoreError("store `" + uri_ + "`: more than the " + std::to_string(size) + " bytes announced came to be kept");
      for (std::size_t done = 0; done < n;) {
        const int wrote = lo_write(conn_, fd, buffer.data() + done, n - done);
        if (wrote <= 0) largeObjectFailed("cannot write large object " + std::to_string(oid));
        done += static_cast<std::size_t>(wrote);
      }
      at += n;
    }
    if (lo_close(conn_, fd) != 0) largeObjectFailed("cannot close large object " + std::to_string(oid));
    if (at != size)
      throw StoreError("store `" + uri_ + "`: " + std::to_string(at) + " bytes came of the " + std::to_string(size) + " announced");
    return static_cast<long long>(oid);
  }

  void readContent(long long id, const ChunkSink& sink) override {
    BlockingWhile blocking(*this);
    const int fd = lo_open(conn_, static_cast<Oid>(id), INV_READ);
    if (fd < 0) largeObjectFailed("cannot open large object " + std::to_string(id));
    std::vector<char> buffer(kContentChunkBytes);
    for (;;) {
      const int n = lo_read(conn_, fd, buffer.data(), buffer.size());
      if (n < 0) largeObjectFailed("cannot read large object " + std::to_string(id));
      if (n == 0) break;
      sink(buffer.data(), static_cast<std::size_t>(n));
    }
    lo_close(conn_, fd);
  }

  void deleteContent(long long id) override {
    // One removed by hand (lo_unlink) is gone already: unlinking it again
    // would fail the transaction that deletes its record.
    if (query("SELECT 1 FROM pg_largeobject_metadata WHERE oid = ?", {id}).empty()) return;
    BlockingWhile blocking(*this);
    if (lo_unlink(conn_, static_cast<Oid>(id)) < 0) largeObjectFailed("cannot remove large object " + std::to_string(id));
  }

  // A transaction starts on a live connection: one lost (a server restarted,
  // a statement given up on) is made again first. Within a transaction a
  // lost connection is an error: what it did is gone with it.
  void beginWrite() override { begin(); }
  void beginRead() override { begin(); }
  void commit() override { execute("COMMIT"); }
  void rollback() override {
    if (lost_ || PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
    try {
      execute("ROLLBACK");
    } catch (const StoreError&) {
      // The connection is marked lost: the server ends the transaction with it.
    }
  }

 private:
  static constexpr long long kStatementTimeoutMs = 60000;
  static constexpr long long kAnswerMarginMs = 5000;

  static std::string trimmed(std::string why) {
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return why;
  }

  void begin() {
    if (lost_ || PQstatus(conn_) != CONNECTION_OK) {
      PQsetnonblocking(conn_, 0);
      PQreset(conn_);
      if (PQstatus(conn_) != CONNECTION_OK)
        throw StoreError("store `" + uri_ + "`: the connection was lost and cannot be made again: " +
                         scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
      PQsetnonblocking(conn_, 1);
      lost_ = false;
    }
    execute("BEGIN");
  }

  // The connection in blocking mode for as long as it lives.
  class BlockingWhile {
   public:
    explicit BlockingWhile(PostgresConnection& c) : c_(c) {
      if (c_.lost_ || PQstatus(c_.conn_) != CONNECTION_OK) c_.lose("the connection to the server was lost");
      PQsetnonblocking(c_.conn_, 0);
    }
    ~BlockingWhile() { PQsetnonblocking(c_.conn_, 1); }
    BlockingWhile(const BlockingWhile&) = delete;
    BlockingWhile& operator=(const BlockingWhile&) = delete;

   private:
    PostgresConnection& c_;
  };

  [[noreturn]] void largeObjectFailed(const std::string& what) {
    if (PQstatus(conn_) != CONNECTION_OK) lost_ = true;
    throw StoreError("store `" + uri_ + "`: " + what + ": " + scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
  }

  [[noreturn]] void lose(const std::string& why) {
    lost_ = true;
    throw StoreError("store `" + uri_ + "`: " + why);
  }

  // Waits until the connection's socket is ready for `events`, at most until
  // `deadline`; false when the deadline passed.
  bool await(short events, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{PQsocket(conn_), events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000000)));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) lose(std::string("waiting for the server: ") + std::strerror(errno));
    }
  }

  [[noreturn]] void noAnswer() {
    lose("the server did not answer within " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(answerWithin_).count()) +
         " s (the statement timeout, " + statementTimeout_ + ", and " + std::to_string(kAnswerMarginMs / 1000) +
         " s more): check that the server is up and reachable; the URI's `options=-c statement_timeout=...` "
         "allows longer statements");
  }

  // Sends a query (`send`: PQsendQuery or PQsendQueryParams) and reads all its
  // results, within the statement timeout and its margin: the last result,
  // or StoreError for the first that failed.
  template <typename Send>
  PGresult* roundTrip(Send send) {
    if (lost_ || PQstatus(conn_) != CONNECTION_OK) lose("the connection to the server was lost");
    if (send() == 0) lose(scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
    const auto deadline = std::chrono::steady_clock::now() + answerWithin_;
    for (;;) {  // what the server has not taken yet
      const int left = PQflush(conn_);
      if (left == 0) break;
      if (left < 0) lose(scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
      if (!await(POLLIN | POLLOUT, deadline)) noAnswer();
      if (PQconsumeInput(conn_) == 0) lose(scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
    }
    PGresult* last = nullptr;
    std::string failure;
    for (;;) {
      while (PQisBusy(conn_) != 0) {
        if (!await(POLLIN, deadline)) {
          PQclear(last);
          noAnswer();
        }
        if (PQconsumeInput(conn_) == 0) {
          PQclear(last);
          lose(scrubbed(trimmed(PQerrorMessage(conn_)), secrets_));
        }
      }
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) break;
      const ExecStatusType s = PQresultStatus(r);
      if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && failure.empty()) {
        failure = trimmed(PQresultErrorMessage(r));
        if (failure.empty()) failure = std::string("the statement failed (") + PQresStatus(s) + ")";
      }
      PQclear(last);
      last = r;
    }
    if (PQstatus(conn_) != CONNECTION_OK) lost_ = true;
    if (!failure.empty() || last == nullptr) {
      PQclear(last);
      if (failure.empty()) failure = trimmed(PQerrorMessage(conn_));
      throw StoreError("store `" + uri_ + "`: " + scrubbed(failure, secrets_));
    }
    return last;
  }

  PGresult* run(const std::string& text, const std::vector<std::optional<std::string>>& values) {
    std::vector<const char*> pointers;
    for (const auto& v : values) pointers.push_back(v ? v->c_str() : nullptr);
    return roundTrip([&] {
      return PQsendQueryParams(conn_, text.c_str(), static_cast<int>(pointers.size()), nullptr, pointers.data(), nullptr,
                               nullptr, 0);
    });
  }

  std::vector<std::string> secrets_;   // declared before uri_, which is made from them
  std::string uri_;
  PGconn* conn_ = nullptr;
  std::string statementTimeout_;       // as the server reads it ("60000ms", "5s")
  std::chrono::milliseconds answerWithin_ = std::chrono::hours(24 * 365);  // no timeout: as good as none
  bool lost_ = false;                  // a statement was given up on, or the connection broke
};

}  // namespace

std::string printableLocation(const std::string& location) { return scrubbed(location, secretsOf(location)); }

std::unique_ptr<SqlConnection> connectPostgres(const std::string& uri) {
  return std::make_unique<PostgresConnection>(uri);
}

}  // namespace ipu::store
