#include "cudal1/bench/result_log.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string serialize(const json& line) {
  return line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// Finished lines of `text` by task, the last of each; `text` must end at a line end. `superseded`
// counts the earlier lines of a task that a later one replaces.
std::map<TaskRef, json> parse_lines(const std::string& text, const fs::path& file,
                                    std::size_t* superseded = nullptr) {
  std::map<TaskRef, json> lines;
  std::size_t start = 0;
  std::size_t number = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (raw.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      json line = json::parse(raw);
      const TaskRef ref = result_ref(line);
      if (lines.contains(ref) && superseded != nullptr) ++*superseded;
      lines[ref] = std::move(line);
    } catch (const std::exception& e) {
      throw InputError(fmt::format(
          "'{}' line {} is not a benchmark result ({}); move the file away or use another --out",
          file.string(), number, e.what()));
    }
  }
  return lines;
}

void write_all(int fd, const std::string& text, const fs::path& file) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw std::system_error(errno, std::generic_category(),
                              fmt::format("cannot write to '{}'", file.string()));
    }
    written += static_cast<std::size_t>(n);
  }
}

}  // namespace

TaskRef result_ref(const json& line) {
  if (!line.is_object() || !line.contains("level") || !line.contains("task_id") ||
      !line["level"].is_number_integer() || !line["task_id"].is_number_integer()) {
    throw std::invalid_argument("a result line needs integer \"level\" and \"task_id\"");
  }
  return {line["level"].get<int>(), line["task_id"].get<int>()};
}

ResultLog::ResultLog(fs::path file) : file_(std::move(file)) {
  if (file_.has_parent_path()) fs::create_directories(file_.parent_path());
  std::string text;
  if (fs::exists(file_)) text = read_file(file_);
  // A line is finished when its newline is on disk: anything after the last one is a write that
  // a crash cut short.
  const std::size_t last_newline = text.rfind('\n');
  const std::size_t finished = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (finished < text.size()) {
    dropped_bytes_ = text.size() - finished;
    text.resize(finished);
    fs::resize_file(file_, finished);
  }
  std::size_t superseded = 0;
  lines_ = parse_lines(text, file_, &superseded);
  // A run stopped between re-evaluating a task and compacting the file (kill -9) left the task's
  // old line too; other readers of the file (cudal1 report) must see one line per task, also if
  // this run is killed in turn.
  if (superseded > 0) {
    compact();
  } else {
    reopen();
  }
}

ResultLog::~ResultLog() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultLog::reopen() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot open '{}' for appending", file_.string()));
  }
}

const json* ResultLog::find(TaskRef ref) const {
  const auto found = lines_.find(ref);
  return found == lines_.end() ? nullptr : &found->second;
}

void ResultLog::append(const json& line) {
  write_all(fd_, serialize(line), file_);
  if (::fsync(fd_) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot flush '{}' to disk", file_.string()));
  }
  lines_[result_ref(line)] = line;
}

void ResultLog::compact() {
  std::string text;
  for (const auto& [ref, line] : lines_) text += serialize(line);
  // The new content reaches the disk before it replaces the old: a crash leaves one or the other.
  fs::path temporary = file_;
  temporary += fmt::format(".compact{}", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot write '{}'", temporary.string()));
  }
  write_all(fd, text, temporary);
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot flush '{}' to disk", temporary.string()));
  }
  fs::rename(temporary, file_);
  reopen();
}

std::map<TaskRef, json> ResultLog::read(const fs::path& file) {
  std::string text = read_file(file);
  const std::size_t last = text.rfind('\n');
  text.resize(last == std::string::npos ? 0 : last + 1);
  return parse_lines(text, file);
}

}  // namespace cudal1::bench
