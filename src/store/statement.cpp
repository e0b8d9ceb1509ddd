#include "statement.hpp"

#include <fmt/format.h>

#include "cudal1/store/store.hpp"

namespace cudal1::store {
namespace {

// Enough of a statement to recognise it in an error message without flooding the terminal.
constexpr std::size_t kSqlExcerptLength = 60;

std::string excerpt(std::string_view sql) {
  std::string text(sql.substr(0, kSqlExcerptLength));
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return sql.size() > kSqlExcerptLength ? text + "..." : text;
}

}  // namespace

void throw_store_error(sqlite3* db, const std::filesystem::path& path, std::string_view action) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  throw StoreError(fmt::format("store {}: {}: {}", path.string(), action, message));
}

void execute(sqlite3* db, const std::filesystem::path& path, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw_store_error(db, path, excerpt(sql));
  }
}

Statement::Statement(sqlite3* db, const std::filesystem::path& path, std::string_view sql)
    : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement_, nullptr) !=
      SQLITE_OK) {
    throw_store_error(db_, path_, "prepare " + excerpt(sql));
  }
}

Statement::~Statement() {
  sqlite3_finalize(statement_);
}

void Statement::fail(std::string_view action) const {
  throw_store_error(db_, path_, fmt::format("{} {}", action, excerpt(sqlite3_sql(statement_))));
}

void Statement::bind(int index, std::int64_t value) {
  if (sqlite3_bind_int64(statement_, index, value) != SQLITE_OK) fail("bind");
}

void Statement::bind(int index, int value) {
  bind(index, static_cast<std::int64_t>(value));
}

void Statement::bind(int index, double value) {
  if (sqlite3_bind_double(statement_, index, value) != SQLITE_OK) fail("bind");
}

void Statement::bind(int index, std::string_view value) {
  // An empty view may carry a null data pointer, which SQLite would store as NULL, not ''.
  const char* data = value.data() != nullptr ? value.data() : "";
  if (sqlite3_bind_text64(statement_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
      SQLITE_OK) {
    fail("bind");
  }
}

void Statement::bind_null(int index) {
  if (sqlite3_bind_null(statement_, index) != SQLITE_OK) fail("bind");
}

bool Statement::step() {
  const int result = sqlite3_step(statement_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  fail("run");
}

int Statement::run() {
  if (step()) fail("unexpected row from");
  return sqlite3_changes(db_);
}

std::int64_t Statement::int64(int column) const {
  return sqlite3_column_int64(statement_, column);
}

double Statement::real(int column) const {
  return sqlite3_column_double(statement_, column);
}

std::string Statement::text(int column) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
  if (data == nullptr) return {};
  return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
}

std::optional<std::int64_t> Statement::optional_int64(int column) const {
  if (sqlite3_column_type(statement_, column) == SQLITE_NULL) return std::nullopt;
  return int64(column);
}

std::optional<double> Statement::optional_real(int column) const {
  if (sqlite3_column_type(statement_, column) == SQLITE_NULL) return std::nullopt;
  return real(column);
}

std::optional<std::string> Statement::optional_text(int column) const {
  if (sqlite3_column_type(statement_, column) == SQLITE_NULL) return std::nullopt;
  return text(column);
}

Transaction::Transaction(sqlite3* db, const std::filesystem::path& path) : db_(db), path_(path) {
  execute(db_, path_, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  // SQLite rolls back by itself after some errors (disk full, I/O); then there is nothing left
  // to undo and ROLLBACK would only report that no transaction is active.
  if (open_ && sqlite3_get_autocommit(db_) == 0) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  execute(db_, path_, "COMMIT");
  open_ = false;
}

}  // namespace cudal1::store
