// PostgreSQL behind SqlConnection, through libpq. Parameters travel as text
// (numbers with 17 significant digits, so doubles round-trip exactly) and
// the server infers their types from the columns. A batch of inserts becomes
// multi-row INSERTs of up to 1,000 rows, one round trip each.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
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
    const std::size_t end = std::min(uri.find_first_of("/?", start), uri.size());
    const std::size_t at = uri.rfind('@', end == uri.size() ? std::string::npos : end);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = uri.find(':', start);
      if (colon != std::string::npos && colon < at) add(uri.substr(colon + 1, at - colon - 1));
    }
  }
  for (std::size_t p = uri.find("password="); p != std::string::npos; p = uri.find("password=", p + 1)) {
    if (p > 0 && uri[p - 1] != '?' && uri[p - 1] != '&' && uri[p - 1] != ' ') continue;
    const std::size_t v = p + 9;
    add(uri.substr(v, std::min(uri.find_first_of("& ", v), uri.size()) - v));
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

class PostgresConnection : public SqlConnection {
 public:
  explicit PostgresConnection(const std::string& uri) : secrets_(secretsOf(uri)), uri_(scrubbed(uri, secrets_)) {
    // A server that accepts and never answers must not hang the command:
    // 10 s to connect unless the URI says otherwise (its own parameters,
    // expanded after this default, override it).
    const char* keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* values[] = {"10", uri.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      std::string why = conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      // libpq's message may quote the URI, password and all.
      throw StoreError("cannot connect to `" + uri_ + "`: " + scrubbed(why, secrets_));
    }
    // Notices (e.g. "relation already exists, skipping") are not for the user.
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }
  ~PostgresConnection() override { PQfinish(conn_); }
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  SqlDialect dialect() const override { return SqlDialect::Postgres; }

  void execute(const std::string& sql) override {
    PGresult* r = PQexec(conn_, sql.c_str());
    check(r);
    PQclear(r);
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

  void beginWrite() override { execute("BEGIN"); }
  void beginRead() override { execute("BEGIN"); }
  void commit() override { execute("COMMIT"); }
  void rollback() override {
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE) PQclear(PQexec(conn_, "ROLLBACK"));
  }

 private:
  PGresult* run(const std::string& text, const std::vector<std::optional<std::string>>& values) {
    std::vector<const char*> pointers;
    for (const auto& v : values) pointers.push_back(v ? v->c_str() : nullptr);
    PGresult* r = PQexecParams(conn_, text.c_str(), static_cast<int>(pointers.size()), nullptr, pointers.data(),
                               nullptr, nullptr, 0);
    check(r);
    return r;
  }

  void check(PGresult* r) {
    ExecStatusType s = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return;
    std::string why = r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    PQclear(r);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw StoreError("store `" + uri_ + "`: " + scrubbed(why, secrets_));
  }

  std::vector<std::string> secrets_;   // declared before uri_, which is made from them
  std::string uri_;
  PGconn* conn_ = nullptr;
};

}  // namespace

std::string printableLocation(const std::string& location) { return scrubbed(location, secretsOf(location)); }

std::unique_ptr<SqlConnection> connectPostgres(const std::string& uri) {
  return std::make_unique<PostgresConnection>(uri);
}

}  // namespace ipu::store
