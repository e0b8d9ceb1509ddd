#include "cudal1/queue/job_files.hpp"

#include <algorithm>
#include <cctype>

#include "cudal1/common/text_file.hpp"

namespace cudal1::queue {
namespace {

namespace fs = std::filesystem;

// The submitter's base name when it is a plain file name, else `fallback`: the name is the
// module's and appears in tracebacks, but a path must not lead out of the job's directory.
std::string base_name(const std::string& path, const char* fallback) {
  const std::string name = fs::path(path).filename().string();
  const bool plain =
      !name.empty() && name != "." && name != ".." &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  return plain ? name : fallback;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return;
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

JobFiles::JobFiles(const fs::path& root, const Job& job, const std::string& entry_id)
    : dir_(root / (job.id.substr(0, 16) + "-" + entry_id)),
      task_(dir_ / "task" / base_name(job.task_path, "task.py")),
      candidate_(dir_ / "candidate" / base_name(job.candidate_path, "candidate.py")),
      submitted_task_(job.task_path),
      submitted_candidate_(job.candidate_path) {
  fs::remove_all(dir_);
  fs::create_directories(task_.parent_path());
  fs::create_directories(candidate_.parent_path());
  write_file_atomic(task_, job.task_source);
  write_file_atomic(candidate_, job.candidate_source);
}

JobFiles::~JobFiles() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string JobFiles::as_submitted(std::string text) const {
  replace_all(text, task_.string(), submitted_task_);
  replace_all(text, candidate_.string(), submitted_candidate_);
  return text;
}

}  // namespace cudal1::queue
