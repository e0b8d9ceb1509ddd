// The store's tables, created on first open and checked on every later one.
#pragma once

#include <sqlite3.h>

#include <filesystem>

namespace cudal1::store {

// PRAGMA user_version of the schema this code writes and reads.
inline constexpr int kSchemaVersion = 2;

// Creates the tables in an empty database, upgrades a version-1 database (adds the rewards
// table), accepts a database at kSchemaVersion, and throws
// StoreError for anything else (a newer cudal1's database, some other program's database).
void ensure_schema(sqlite3* db, const std::filesystem::path& path);

}  // namespace cudal1::store
