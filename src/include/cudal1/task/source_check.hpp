// Static checks of task and candidate files before anything is run: readable UTF-8 text, valid
// Python, and the names the KernelBench format requires. Failures are InputErrors.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cudal1 {

struct SourceInfo {
  std::filesystem::path path;
  std::string text;
  std::vector<std::string> classes;      // top-level class names
  std::vector<std::string> functions;    // top-level function names
  std::vector<std::string> assignments;  // top-level assigned names
  bool uses_load_inline = false;
  std::vector<std::string>
      precision_markers;                  // half/bfloat16/autocast/TF32 in code or CUDA strings
  std::vector<std::string> kernel_names;  // __global__ functions and Triton @jit functions
  // What needs CUDA, as "load_inline with cuda_sources on line 12": code built for the GPU
  // (nvcc, Triton), and calls that put work on a CUDA device (.cuda(), device "cuda").
  std::vector<std::string> cuda_builds;
  std::vector<std::string> cuda_calls;

  bool defines(const std::string& name) const;
};

// Reads and parses a file (the parse runs in a worker process). `role` is "task" or "candidate".
SourceInfo inspect_source(const std::filesystem::path& path, const std::string& role,
                          const std::filesystem::path& worker);

// A task needs class Model and functions get_inputs and get_init_inputs.
void require_task_format(const SourceInfo& task);
// A candidate needs class ModelNew.
void require_candidate_format(const SourceInfo& candidate);

// Names the candidate defines that belong to the task (sizes, get_inputs, get_init_inputs). They
// are never used: inputs and constructor arguments always come from the task.
std::vector<std::string> task_overrides(const SourceInfo& task, const SourceInfo& candidate);

// Reduced-precision markers of the candidate that the task's own code does not have.
std::vector<std::string> precision_downcasts(const SourceInfo& task, const SourceInfo& candidate);

}  // namespace cudal1
