#include "store_option.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "cudal1/common/error.hpp"

namespace cudal1::cli {

store::Store open_store(const std::string& db) {
  try {
    return store::Store(db);
  } catch (const store::StoreError& e) {
    throw InputError(fmt::format("--db: {}", e.what()));
  }
}

store::Store open_existing_store(const std::string& db, const std::string& written_by) {
  // SQLite would create a missing store, empty: nothing to read, and a stray file left behind.
  std::error_code ec;
  if (!std::filesystem::exists(db, ec)) {
    throw InputError(fmt::format("--db '{}' does not exist: name the store {}", db, written_by));
  }
  return open_store(db);
}

}  // namespace cudal1::cli
