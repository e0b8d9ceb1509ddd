#include "cudal1/task/source_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cudal1/common/error.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// Parsing a file needs no PyTorch; a minute covers a cold interpreter start on a loaded machine.
constexpr double kInspectTimeoutSeconds = 60;

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool SourceInfo::defines(const std::string& name) const {
  return contains(classes, name) || contains(functions, name) || contains(assignments, name);
}

SourceInfo inspect_source(const std::filesystem::path& path, const std::string& role,
                          const std::filesystem::path& worker) {
  SourceInfo info;
  info.path = path;
  info.text = read_source_file(path, role);
  ProcessSpec spec;
  spec.argv = {worker.string(), proto::mode::kInspect, std::filesystem::absolute(path).string()};
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(run_and_capture(spec, kInspectTimeoutSeconds));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("cannot inspect {} file '{}' with {}: {}", role,
                                         path.string(), worker.string(), e.what()));
  }
  if (!result.value("ok", false)) {
    std::string where;
    if (result.contains("line") && result["line"].is_number()) {
      where = fmt::format(" on line {}", result["line"].get<int>());
      if (result.contains("column") && result["column"].is_number()) {
        where += fmt::format(", column {}", result["column"].get<int>());
      }
    }
    throw InputError(fmt::format("{} file '{}' is not valid Python{}: {}", role, path.string(),
                                 where, result.value("error", "unknown error")),
                     subject_of_role(role));
  }
  info.classes = result.value("classes", std::vector<std::string>{});
  info.functions = result.value("functions", std::vector<std::string>{});
  info.assignments = result.value("assignments", std::vector<std::string>{});
  info.uses_load_inline = result.value("uses_load_inline", false);
  info.precision_markers = result.value("precision_markers", std::vector<std::string>{});
  info.kernel_names = result.value("kernel_names", std::vector<std::string>{});
  info.cuda_builds = result.value("cuda_builds", std::vector<std::string>{});
  info.cuda_calls = result.value("cuda_calls", std::vector<std::string>{});
  return info;
}

void require_task_format(const SourceInfo& task) {
  if (!contains(task.classes, "Model")) {
    throw InputError(fmt::format("task file '{}' defines no class Model (the reference nn.Module)",
                                 task.path.string()),
                     InputError::Subject::kTask);
  }
  for (const char* name : {"get_inputs", "get_init_inputs"}) {
    if (!task.defines(name)) {
      throw InputError(
          fmt::format("task file '{}' defines no function {}()", task.path.string(), name),
          InputError::Subject::kTask);
    }
  }
}

void require_candidate_format(const SourceInfo& candidate) {
  if (!contains(candidate.classes, "ModelNew")) {
    throw InputError(
        fmt::format("candidate file '{}' defines no class ModelNew", candidate.path.string()),
        InputError::Subject::kCandidate);
  }
}

std::vector<std::string> task_overrides(const SourceInfo& task, const SourceInfo& candidate) {
  std::vector<std::string> out;
  for (const char* name : {"get_inputs", "get_init_inputs"}) {
    if (candidate.defines(name)) out.emplace_back(name);
  }
  for (const auto& name : task.assignments) {
    if (candidate.defines(name) && !contains(out, name)) out.push_back(name);
  }
  return out;
}

std::vector<std::string> precision_downcasts(const SourceInfo& task, const SourceInfo& candidate) {
  std::vector<std::string> out;
  for (const auto& marker : candidate.precision_markers) {
    if (std::find(task.precision_markers.begin(), task.precision_markers.end(), marker) ==
        task.precision_markers.end())
      out.push_back(marker);
  }
  return out;
}

}  // namespace cudal1
