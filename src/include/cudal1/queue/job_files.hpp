// A job's sources written to files on the worker's host, under the base names the submitter
// used; messages that name these files are given the submitter's paths back.
#pragma once

#include <filesystem>
#include <string>

#include "cudal1/queue/job.hpp"

namespace cudal1::queue {

class JobFiles {
 public:
  // Writes DIR/task/<name> and DIR/candidate/<name>, DIR = `root`/<job id>-<entry id>.
  JobFiles(const std::filesystem::path& root, const Job& job, const std::string& entry_id);
  // Removes the directory unless keep() was called.
  ~JobFiles();
  JobFiles(const JobFiles&) = delete;
  JobFiles& operator=(const JobFiles&) = delete;

  const std::filesystem::path& task() const { return task_; }
  const std::filesystem::path& candidate() const { return candidate_; }
  void keep() { keep_ = true; }
  // `text` with this host's paths of the files replaced by the submitter's.
  std::string as_submitted(std::string text) const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path task_;
  std::filesystem::path candidate_;
  std::string submitted_task_;
  std::string submitted_candidate_;
  bool keep_ = false;
};

}  // namespace cudal1::queue
