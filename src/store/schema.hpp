// The store's tables, created on first open and checked on every later one.
#pragma once

#include <sqlite3.h>

#include <filesystem>

namespace cudal1::store {

// PRAGMA user_version of the schema this code writes and reads.
inline constexpr int kSchemaVersion = 3;

// Creates the tables in an empty database, upgrades an older one (version 1 gains the rewards
// table, version 2 the answers of reward requests), accepts a database at kSchemaVersion, and
// throws
// StoreError for anything else (a newer cudal1's database, some other program's database).
void ensure_schema(sqlite3* db, const std::filesystem::path& path);

}  // namespace cudal1::store
