// SQLite behind SqlConnection, set up for many writers on one file: WAL (readers
// never block the writer), a busy timeout (a writer waits for the lock instead
// of failing with "database is locked"), synchronous=NORMAL (durable at every
// checkpoint, safe against a killed process), and BEGIN IMMEDIATE for writes.
// Prepared statements are kept per SQL text, so batches do not re-parse.
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <map>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"

namespace ipu::store {

namespace {

constexpr int kBusyTimeoutMs = 30000;

class SqliteConnection : public SqlConnection {
 public:
  SqliteConnection(const std::string& path, bool create) : path_(path) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
      std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError("cannot open `" + path + "`: " + why);
    }
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    sqlite3_extended_result_codes(db_, 1);
  }
  ~SqliteConnection() override {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  SqlDialect dialect() const override { return SqlDialect::Sqlite; }

  void execute(const std::string& sql) override {
    char* message = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
      std::string why = message != nullptr ? message : sqlite3_errstr(rc);
      sqlite3_free(message);
      fail(why);
    }
  }

  std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    sqlite3_stmt* stmt = prepare(sql);
    bind(stmt, params);
    std::vector<SqlRow> rows;
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        std::string why = sqlite3_errmsg(db_);
        sqlite3_reset(stmt);
        fail(why);
      }
      int n = sqlite3_column_count(stmt);
      SqlRow row(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        if (sqlite3_column_type(stmt, i) == SQLITE_NULL) continue;
        if (sqlite3_column_type(stmt, i) == SQLITE_FLOAT) {
          // Full precision: the default text conversion keeps 15 digits only.
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(stmt, i));
          row[static_cast<std::size_t>(i)] = std::string(buf);
          continue;
        }
        const unsigned char* text = sqlite3_column_text(stmt, i);
        row[static_cast<std::size_t>(i)] =
            std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(stmt, i)));
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(stmt);
    return rows;
  }

  void executeMany(const std::string& sql, const std::vector<std::vector<SqlValue>>& rows) override {
    sqlite3_stmt* stmt = prepare(sql);
    for (const auto& params : rows) {
      bind(stmt, params);
      int rc = sqlite3_step(stmt);
      if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        std::string why = sqlite3_errmsg(db_);
        sqlite3_reset(stmt);
        fail(why);
      }
      sqlite3_reset(stmt);
    }
  }

  long long writeContent(std::uint64_t size, const ChunkSource& source) override {
    // SQLite holds a value of at most SQLITE_MAX_LENGTH bytes (1 GB by default).
    const int most = sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, -1);
    if (size > static_cast<std::uint64_t>(most)) return -1;
    // A row of zeros of the right size, then written into in place.
    query("INSERT INTO artifact_contents(data) VALUES (zeroblob(?))", {static_cast<long long>(size)});
    const sqlite3_int64 row = sqlite3_last_insert_rowid(db_);
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db_, "main", "artifact_contents", "data", row, /*write=*/1, &blob) != SQLITE_OK) {
      std::string why = sqlite3_errmsg(db_);
      sqlite3_blob_close(blob);
      fail(why);
    }
    std::vector<char> buffer(kContentChunkBytes);
    std::uint64_t at = 0;
    for (;;) {
      const std::size_t n = source(buffer.data(), buffer.size());
      if (n == 0) break;
      if (at + n > size) {
        sqlite3_blob_close(blob);
        throw StoreError("store `" + path_ + "`: more than the " + std::to_string(size) + " bytes announced came to be kept");
      }
      if (sqlite3_blob_write(blob, buffer.data(), static_cast<int>(n), static_cast<int>(at)) != SQLITE_OK) {
        std::string why = sqlite3_errmsg(db_);
        sqlite3_blob_close(blob);
        fail(why);
      }
      at += n;
    }
    if (sqlite3_blob_close(blob) != SQLITE_OK) fail(sqlite3_errmsg(db_));
    if (at != size)
      throw StoreError("store `" + path_ + "`: " + std::to_string(at) + " bytes came of the " + std::to_string(size) + " announced");
    return static_cast<long long>(row);
  }

  void readContent(long long id, const ChunkSink& sink) override {
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db_, "main", "artifact_contents", "data", id, /*write=*/0, &blob) != SQLITE_OK) {
      std::string why = sqlite3_errmsg(db_);
      sqlite3_blob_close(blob);
      fail("the artifact contents " + std::to_string(id) + " cannot be read: " + why);
    }
    const int size = sqlite3_blob_bytes(blob);
    std::vector<char> buffer(kContentChunkBytes);
    for (int at = 0; at < size;) {
      const int n = std::min(size - at, static_cast<int>(buffer.size()));
      if (sqlite3_blob_read(blob, buffer.data(), n, at) != SQLITE_OK) {
        std::string why = sqlite3_errmsg(db_);
        sqlite3_blob_close(blob);
        fail(why);
      }
      try {
        sink(buffer.data(), static_cast<std::size_t>(n));
      } catch (...) {
        sqlite3_blob_close(blob);
        throw;
      }
      at += n;
    }
    sqlite3_blob_close(blob);
  }

  void deleteContent(long long id) override { query("DELETE FROM artifact_contents WHERE id = ?", {id}); }

  void beginWrite() override { execute("BEGIN IMMEDIATE"); }
  void beginRead() override { execute("BEGIN"); }
  void commit() override { execute("COMMIT"); }
  void rollback() override {
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    const int code = sqlite3_extended_errcode(db_) & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) throw StoreBusy("store `" + path_ + "`: " + why);
    throw StoreError("store `" + path_ + "`: " + why);
  }

  sqlite3_stmt* prepare(const std::string& sql) {
    auto it = statements_.find(sql);
    if (it != statements_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK)
      fail(sqlite3_errmsg(db_));
    statements_.emplace(sql, stmt);
    return stmt;
  }

  void bind(sqlite3_stmt* stmt, const std::vector<SqlValue>& params) {
    sqlite3_clear_bindings(stmt);
    for (std::size_t i = 0; i < params.size(); ++i) {
      int at = static_cast<int>(i) + 1, rc = SQLITE_OK;
      const SqlValue& v = params[i];
      if (std::holds_alternative<std::nullptr_t>(v)) rc = sqlite3_bind_null(stmt, at);
      else if (const auto* n = std::get_if<long long>(&v)) rc = sqlite3_bind_int64(stmt, at, *n);
      else if (const auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(stmt, at, *d);
      else {
        const std::string& s = std::get<std::string>(v);
        rc = sqlite3_bind_text(stmt, at, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) fail(sqlite3_errmsg(db_));
    }
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace

std::unique_ptr<SqlConnection> connectSqlite(const std::string& path, bool create) {
  if (!create) {
    // The non-throwing form: a directory on the way that cannot be searched
    // (permissions) is an answer to give the user, not an exception to abort on.
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      throw StoreError("cannot look for a store at `" + path + "`: " + ec.message() +
                       " (check the permissions of the directories on its path, or pass another --store)");
    if (!exists) throw StoreError("there is no store at `" + path + "` (nothing has been recorded there yet)");
  }
  return std::make_unique<SqliteConnection>(path, create);
}

}  // namespace ipu::store
