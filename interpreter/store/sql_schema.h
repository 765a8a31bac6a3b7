// The run store's tables, shared by the two stores over one database: runs
// (sql_store.cpp) and sweeps (sweep_sql_store.cpp). Opening either creates
// or migrates the whole schema, so a store is always at one version.
#pragma once

#include <memory>
#include <string>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"

namespace ipu::store {

// The connection for a store's location (a file, or a postgresql:// URI);
// Create makes an SQLite file's directory too.
std::unique_ptr<SqlConnection> connectStore(const std::string& location, OpenMode mode);

// Reads the schema version first and writes nothing to a store of a newer
// version (StoreError); creates the tables of a new store and migrates an
// older one in one transaction. `location` is for messages.
void openSchema(SqlConnection& db, const std::string& location);

// One transaction around `body`: committed if it returns, rolled back if it throws.
template <typename F>
void inWriteTransaction(SqlConnection& db, F&& body) {
  db.beginWrite();
  try {
    body();
    db.commit();
  } catch (...) {
    db.rollback();
    throw;
  }
}

template <typename F>
void inReadTransaction(SqlConnection& db, F&& body) {
  db.beginRead();
  try {
    body();
    db.commit();
  } catch (...) {
    db.rollback();
    throw;
  }
}

}  // namespace ipu::store
