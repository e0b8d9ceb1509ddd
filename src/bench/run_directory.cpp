#include "run_directory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cudal1/bench/baseline.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_if_changed(const fs::path& file, const std::string& content) {
  std::error_code ec;
  if (fs::exists(file, ec)) {
    try {
      if (read_file(file) == content) return;
    } catch (const std::exception&) {
      // Unreadable: rewritten below.
    }
  }
  fs::create_directories(file.parent_path());
  write_file_atomic(file, content);
}

bool on_cpu(const json& run) {
  const json devices = run.value("devices", json::array());
  return !devices.empty() && devices[0] == "cpu";
}

// A recorded tolerance (Tolerance::to_json) as the --tolerance value that gives it.
std::string tolerance_option(const json& tolerance) {
  if (!tolerance.is_object()) return "default";
  const std::string mode = tolerance.value("mode", "default");
  if (mode != "custom") return mode;
  return fmt::format("{:g},{:g}", tolerance.value("atol", 0.0), tolerance.value("rtol", 0.0));
}

// Results of one suite on one kind of device belong together; anything else needs its own OUT.
void check_same_run(const fs::path& record, const json& earlier, const json& run) {
  const std::string suite = earlier.value("suite", "");
  if (!suite.empty() && suite != run.value("suite", "")) {
    throw InputError(
        fmt::format("'{}' holds results of the suite '{}', not '{}': use another --out",
                    record.parent_path().string(), suite, run.value("suite", "")));
  }
  // A record from before tolerances were recorded says nothing about its own.
  if (earlier.contains("tolerance") && earlier["tolerance"] != run.value("tolerance", json())) {
    throw InputError(fmt::format(
        "'{}' holds results compared with --tolerance {}, this run uses {}: results under two "
        "tolerances cannot be summarised together; use another --out or the same --tolerance",
        record.parent_path().string(), tolerance_option(earlier["tolerance"]),
        tolerance_option(run.value("tolerance", json()))));
  }
  if (earlier.contains("devices") && on_cpu(earlier) != on_cpu(run)) {
    throw InputError(
        fmt::format("'{}' holds results measured on {}, this run uses {}: use another --out",
                    record.parent_path().string(), earlier["devices"].dump(),
                    run.value("devices", json::array()).dump()));
  }
}

}  // namespace

RunDirectory::RunDirectory(const fs::path& out, const json& run) : out_(fs::absolute(out)) {
  std::error_code ec;
  if (fs::exists(out_, ec) && !fs::is_directory(out_, ec)) {
    throw InputError(fmt::format("--out '{}' is a file, not a directory", out.string()));
  }
  fs::create_directories(out_);
  const fs::path lock = out_ / ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    throw InputError(fmt::format("cannot create '{}': {}", lock.string(), std::strerror(errno)));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    throw InputError(fmt::format(
        "another cudal1 bench is writing to '{}': wait for it or use another --out", out.string()));
  }
  const fs::path record = out_ / "bench.json";
  json merged = run;
  if (fs::exists(record, ec)) {
    json earlier;
    try {
      earlier = json::parse(read_file(record));
      if (!earlier.is_object()) throw std::runtime_error("not a JSON object");
    } catch (const std::exception& e) {
      throw InputError(
          fmt::format("'{}' is not a benchmark record ({}): move it away or use "
                      "another --out",
                      record.string(), e.what()));
    }
    check_same_run(record, earlier, run);
    merged["created_at"] = earlier.value("created_at", run.value("created_at", ""));
  }
  write_file_atomic(record, merged.dump(2) + "\n");
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

fs::path RunDirectory::write_solution(const SuiteTask& task, const std::string& code) const {
  const fs::path file =
      out_ / "solutions" / fmt::format("level{}", task.ref.level) / (task.name + ".py");
  write_if_changed(file, code);
  return file;
}

fs::path RunDirectory::write_baseline_task(const std::string& baseline,
                                           const SuiteTask& task) const {
  const fs::path file =
      out_ / "baselines" / baseline / fmt::format("level{}", task.ref.level) / (task.name + ".py");
  write_if_changed(file, baseline_task_source(baseline, task.file, read_file(task.file)));
  return file;
}

void RunDirectory::write_summary(const json& summary) const {
  write_file_atomic(summary_file(), summary.dump(2) + "\n");
}

}  // namespace cudal1::bench
