// Prepared statements and transactions over the store's one SQLite connection. Every failure
// becomes a StoreError that names the database file, so a user can tell which --db is at fault.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cudal1::store {

// Throws StoreError "<path>: <action>: <SQLite's message>".
[[noreturn]] void throw_store_error(sqlite3* db, const std::filesystem::path& path,
                                    std::string_view action);

// Runs SQL that returns no rows (several statements allowed), such as schema scripts.
void execute(sqlite3* db, const std::filesystem::path& path, const char* sql);

class Statement {
 public:
  Statement(sqlite3* db, const std::filesystem::path& path, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds the values to parameters 1, 2, ... in order.
  template <typename... Values>
  Statement& bind_all(const Values&... values) {
    int index = 0;
    (bind(++index, values), ...);
    return *this;
  }
  void bind(int index, std::int64_t value);
  void bind(int index, int value);
  void bind(int index, double value);
  void bind(int index, std::string_view value);
  void bind_null(int index);
  // An absent value is stored as NULL.
  template <typename Value>
  void bind(int index, const std::optional<Value>& value) {
    if (value) {
      bind(index, *value);
    } else {
      bind_null(index);
    }
  }

  // Advances to the next row; false when the statement has finished.
  bool step();
  // Runs a statement that returns no rows; returns the number of rows it changed.
  int run();

  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::optional<std::int64_t> optional_int64(int column) const;
  std::optional<double> optional_real(int column) const;
  std::optional<std::string> optional_text(int column) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail(std::string_view action) const;

  sqlite3* db_;
  const std::filesystem::path& path_;
  sqlite3_stmt* statement_ = nullptr;
};

// BEGIN IMMEDIATE on construction, ROLLBACK on destruction unless committed. IMMEDIATE takes the
// write lock up front, so a transaction never fails half-way because another connection wrote
// in between (busy_timeout makes it wait instead).
class Transaction {
 public:
  Transaction(sqlite3* db, const std::filesystem::path& path);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  sqlite3* db_;
  const std::filesystem::path& path_;
  bool open_ = true;
};

}  // namespace cudal1::store
