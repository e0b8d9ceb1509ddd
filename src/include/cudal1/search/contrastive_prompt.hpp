// Contrastive prompts: the reference, earlier implementations with their measured speedups, and
// the generation protocol (analysis, design, code), rendered from editable template files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/profile.hpp"
#include "cudal1/eval/tolerance.hpp"
#include "cudal1/llm/chat.hpp"

namespace cudal1::search {

struct ExemplarView {
  std::int64_t candidate_id = 0;
  std::string code;
  double speedup = 1.0;
  bool reference = false;
  // Where its time went (stored_profile of its verdict; the reference's from any verdict of the
  // task); empty where nothing was measured, e.g. before the first verdict.
  std::optional<Profile> profile;
};

struct FailureView {
  std::string code;
  std::string status;  // "compile_error", "runtime_error", "incorrect", ...
  std::string error;   // trimmed
};

struct PromptContext {
  std::string task_name;
  std::string reference_code;
  std::string device;     // "an NVIDIA H200", "the CPU"
  std::string tolerance;  // "atol=1e-4, rtol=1e-4 for fp32 outputs"
  std::vector<ExemplarView> exemplars;
  std::vector<FailureView> failures;
  ProfileDetail profile_detail = ProfileDetail::kSummary;  // --prompt-profile
};

// An exemplar's profile as a template sees it ({{#profile}}...{{/profile}}): summary, diagnosis,
// roof_percent (memory), compute_roof_percent and tflops (the reference's arithmetic over its
// time), time_ms, and with ProfileDetail::kFull the top kernels ({{#kernels}}: name,
// share_percent, own). Null for kNone or without a profile.
nlohmann::json profile_values(const std::optional<Profile>& profile, ProfileDetail detail);

// How a prompt states the tolerance: "atol=0.0001, rtol=0.0001 for float32 outputs (...)".
std::string describe_tolerance(const Tolerance& tolerance);

class PromptLibrary {
 public:
  // Reads system.md and the user template (contrastive.md, or generate.md for the one-shot prompt
  // of `cudal1 generate`) from `dir`; throws InputError naming the file when one is missing or
  // broken (the user's --prompts).
  static PromptLibrary load(const std::filesystem::path& dir,
                            const std::string& user_template = "contrastive.md");
  // --prompts, else $CUDAL1_PROMPTS, else prompts/ beside the binary's parent, else the source
  // tree's.
  static std::filesystem::path default_dir();

  llm::ChatRequest build(const PromptContext& context, const std::string& model, double temperature,
                         std::optional<int> max_tokens) const;
  std::string render_user_message(const PromptContext& context) const;

 private:
  std::string system_;
  std::string user_template_;
  std::filesystem::path dir_;
};

}  // namespace cudal1::search
