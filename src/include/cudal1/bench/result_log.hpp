// OUT/results.jsonl: one JSON line per finished task, appended and flushed to disk as each task
// finishes, so a crash or Ctrl-C loses no finished result; a re-run reads it back to resume.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "cudal1/task/suite.hpp"

namespace cudal1::bench {

class ResultLog {
 public:
  // Opens (creating) the file. An unfinished last line (a crash in the middle of a write) is cut
  // off, and a file with more than one line for a task (a run killed before it compacted) is
  // compacted at once; any other line that is not a result throws InputError naming the file
  // and line.
  explicit ResultLog(std::filesystem::path file);
  ResultLog(const ResultLog&) = delete;
  ResultLog& operator=(const ResultLog&) = delete;
  ~ResultLog();

  // The last line of each task, by task.
  const std::map<TaskRef, nlohmann::json>& lines() const { return lines_; }
  const nlohmann::json* find(TaskRef ref) const;

  // Appends one line (a single write, then fsync) and records it as the task's latest.
  void append(const nlohmann::json& line);
  // Rewrites the file atomically with one line per task (the latest), in level/id order.
  void compact();

  const std::filesystem::path& path() const { return file_; }
  // Bytes of an unfinished last line cut off when the file was opened.
  std::size_t dropped_bytes() const { return dropped_bytes_; }

  // Reads a results file without opening it for writing (for comparisons).
  static std::map<TaskRef, nlohmann::json> read(const std::filesystem::path& file);

 private:
  void reopen();

  std::filesystem::path file_;
  int fd_ = -1;
  std::size_t dropped_bytes_ = 0;
  std::map<TaskRef, nlohmann::json> lines_;
};

// The task a result line belongs to ("level" and "task_id").
TaskRef result_ref(const nlohmann::json& line);

}  // namespace cudal1::bench
