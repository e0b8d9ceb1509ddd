#include "cudal1/report/run_directory.hpp"

#include <fmt/format.h>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "json_fields.hpp"

namespace cudal1::report {

RunKind detect_run_kind(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    throw InputError(fmt::format("result directory '{}' does not exist", dir.string()));
  }
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format(
        "'{}' is not a directory: give the output directory of cudal1 bench or cudal1 optimize",
        dir.string()));
  }
  const bool summary = fs::is_regular_file(dir / "summary.json", ec);
  if (fs::is_regular_file(dir / "results.jsonl", ec)) {
    if (!summary) {
      throw InputError(
          fmt::format("'{}' has results.jsonl but no summary.json: is the bench run "
                      "complete? (cudal1 bench writes both)",
                      dir.string()));
    }
    return RunKind::kBench;
  }
  if (summary) {
    const nlohmann::json json = read_json_file(dir / "summary.json");
    if (json.is_object() && json.contains("run_id") && json.contains("per_round"))
      return RunKind::kOptimize;
  }
  throw InputError(fmt::format(
      "'{}' is neither a cudal1 bench output directory (results.jsonl and summary.json) nor a "
      "cudal1 optimize run directory (summary.json with run_id and per_round, best.py, "
      "candidates.jsonl)",
      dir.string()));
}

SourceFile read_source_if_present(const std::filesystem::path& recorded,
                                  std::initializer_list<std::filesystem::path> candidates) {
  SourceFile file;
  file.path = recorded;
  for (const auto& path : candidates) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) continue;
    try {
      file.text = read_file(path);
      file.path = path;
      return file;
    } catch (const std::exception& e) {
      file.note = fmt::format("not available: cannot read {} ({})", path.string(), e.what());
      return file;
    }
  }
  file.note = recorded.empty()
                  ? "not available"
                  : fmt::format("not available: {} is not on this machine", recorded.string());
  return file;
}

}  // namespace cudal1::report
