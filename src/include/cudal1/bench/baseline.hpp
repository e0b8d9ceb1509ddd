// What a solution's speedup is measured against. "eager" is the task's own Model; every other
// baseline is a generated task file that imports the original task and wraps its Model
// (torch.compile in one of its modes, or CUDA-graph capture and replay), so the engine times the
// solution against it with the unchanged protocol and the same weights and inputs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::bench {

inline constexpr const char* kEager = "eager";

// Every baseline name, in the order reports list them.
const std::vector<std::string>& baseline_names();

// "eager,compile" -> {"eager", "compile"}. The eager baseline is always included (first): it is
// the plain evaluation that decides a task's status. Throws InputError for an unknown name.
std::vector<std::string> parse_baselines(const std::string& list);

// Why a baseline cannot run here (nullopt when it can): torch.compile needs PyTorch 2, CUDA
// graphs a CUDA device.
std::optional<std::string> baseline_unavailable(const std::string& name,
                                                const std::string& torch_version, bool on_cpu);

// The source of the generated task for `name` (not "eager") wrapping the task `task_file`
// (absolute; named in messages) whose source is `task_source` (carried in the generated file).
std::string baseline_task_source(const std::string& name, const std::filesystem::path& task_file,
                                 const std::string& task_source);

}  // namespace cudal1::bench
