// The little a run store needs from a SQL database, so that the store's
// logic and its SQL are written once (sql_store.cpp) and each backend only
// moves values in and out: SQLite (sqlite_connection.cpp) and PostgreSQL
// (postgres_connection.cpp). Statements use `?` placeholders; the PostgreSQL
// connection renumbers them to `$1, $2, ...`. Values come back as text (or
// nothing for NULL), the one representation both libraries share.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ipu::store {

using SqlValue = std::variant<std::nullptr_t, long long, double, std::string>;
using SqlRow = std::vector<std::optional<std::string>>;

enum class SqlDialect { Sqlite, Postgres };

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual SqlDialect dialect() const = 0;
  // Statements without parameters or results (DDL, pragmas); may hold several.
  virtual void execute(const std::string& sql) = 0;
  virtual std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // One statement run once per row of parameters (a batch of inserts).
  virtual void executeMany(const std::string& sql, const std::vector<std::vector<SqlValue>>& rows) = 0;
  // A write transaction that takes the write lock at once (SQLite's BEGIN
  // IMMEDIATE), so that it waits at its start, under the busy timeout,
  // instead of failing at its first write.
  virtual void beginWrite() = 0;
  virtual void beginRead() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;

  // Bytes kept in the database (an artifact's contents), moved in chunks so
  // that a checkpoint of gigabytes is never one allocation: SQLite's
  // incremental blob I/O on a row of `artifact_contents`, PostgreSQL's large
  // objects. Inside a transaction (a write one to write or delete).
  // `source` fills the buffer and returns how many bytes it put there (0:
  // the end); exactly `size` bytes must come. Returns the contents' id, or
  // -1 when the database cannot hold `size` bytes in one value (SQLite's
  // SQLITE_MAX_LENGTH, 1 GB by default), reading nothing.
  using ChunkSource = std::function<std::size_t(char* buffer, std::size_t capacity)>;
  using ChunkSink = std::function<void(const char* bytes, std::size_t n)>;
  virtual long long writeContent(std::uint64_t size, const ChunkSource& source) = 0;
  virtual void readContent(long long id, const ChunkSink& sink) = 0;
  virtual void deleteContent(long long id) = 0;
};

// The size of the chunks contents move in.
constexpr std::size_t kContentChunkBytes = 1 << 20;

// Reading a cell of a row: 0, NaN and "" for NULL.
inline long long cellInt(const std::optional<std::string>& v) { return v ? std::atoll(v->c_str()) : 0; }
inline double cellDouble(const std::optional<std::string>& v) {
  return v ? std::strtod(v->c_str(), nullptr) : std::numeric_limits<double>::quiet_NaN();
}
inline std::string cellText(const std::optional<std::string>& v) { return v ? *v : std::string(); }

// `path`: the database file. With `create` false a missing file is an error.
std::unique_ptr<SqlConnection> connectSqlite(const std::string& path, bool create);
// `uri`: a libpq connection string (postgresql://user@host:port/db?...).
std::unique_ptr<SqlConnection> connectPostgres(const std::string& uri);
// A store location as it may be printed: the password of a URI's user part
// and a `password` parameter replaced by *** (every message and report names
// the store by this).
std::string printableLocation(const std::string& location);

}  // namespace ipu::store
