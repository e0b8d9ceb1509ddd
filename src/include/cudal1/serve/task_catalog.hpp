// The tasks a reward server answers for: the files of a suite in KernelBench layout, each named
// by its key ("level1/3_GeluTanh": the path under the suite without ".py"). Every task is
// checked and copied when the server starts, so candidates are evaluated against the task as it
// was then, whatever later happens to the file, and recorded in the store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/store/store.hpp"

namespace cudal1::serve {

struct CatalogTask {
  std::string key;                 // "level1/3_GeluTanh"
  std::string name;                // "3_GeluTanh"
  std::filesystem::path file;      // the suite's file
  std::filesystem::path snapshot;  // the copy evaluations use
  std::string source;
  std::string source_sha256;
  std::int64_t task_id = 0;  // in the store
};

class TaskCatalog {
 public:
  // Reads the suite (the rules of Suite::load), checks every task file with the worker
  // (`threads` at a time), copies each into `work_dir`/tasks/ and records it in the store.
  // Throws InputError naming the suite or the file for anything unusable.
  static TaskCatalog load(const std::filesystem::path& suite_dir,
                          const std::filesystem::path& work_dir, store::Store& store,
                          const std::filesystem::path& worker, unsigned threads);

  // A catalog of tasks already checked and recorded (tests, embedding programs).
  static TaskCatalog of(std::filesystem::path root, std::vector<CatalogTask> tasks);

  // nullptr for a key that is not in the suite.
  const CatalogTask* find(std::string_view key) const;
  const std::vector<CatalogTask>& tasks() const { return tasks_; }
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  std::vector<CatalogTask> tasks_;  // by level, then id
};

}  // namespace cudal1::serve
