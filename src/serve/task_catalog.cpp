#include "cudal1/serve/task_catalog.hpp"

#include <algorithm>

#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/task/suite.hpp"

namespace cudal1::serve {

TaskCatalog TaskCatalog::load(const std::filesystem::path& suite_dir,
                              const std::filesystem::path& work_dir, store::Store& store,
                              const std::filesystem::path& worker, unsigned threads) {
  const Suite suite = Suite::load(suite_dir);
  check_task_formats(suite, worker, threads);
  TaskCatalog catalog;
  catalog.root_ = suite.root;
  for (const auto& task : suite.tasks) {
    CatalogTask entry;
    entry.key = task.key();
    entry.name = task.name;
    entry.file = task.file;
    entry.source = read_source_file(task.file, "task");
    entry.source_sha256 = sha256_hex(entry.source);
    // One copy per content: a task edited between two runs of the server keeps both versions.
    entry.snapshot = work_dir / "tasks" / entry.source_sha256.substr(0, 16) / (entry.key + ".py");
    if (!std::filesystem::exists(entry.snapshot)) {
      std::filesystem::create_directories(entry.snapshot.parent_path());
      write_file_atomic(entry.snapshot, entry.source);
    }
    entry.task_id = store.upsert_task(task.file.string(), entry.source).id;
    catalog.tasks_.push_back(std::move(entry));
  }
  return catalog;
}

TaskCatalog TaskCatalog::of(std::filesystem::path root, std::vector<CatalogTask> tasks) {
  TaskCatalog catalog;
  catalog.root_ = std::move(root);
  catalog.tasks_ = std::move(tasks);
  return catalog;
}

const CatalogTask* TaskCatalog::find(std::string_view key) const {
  const auto it = std::find_if(tasks_.begin(), tasks_.end(),
                               [&](const CatalogTask& task) { return task.key == key; });
  return it == tasks_.end() ? nullptr : &*it;
}

}  // namespace cudal1::serve
