#include "cudal1/search/contrastive_prompt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "cudal1/common/error.hpp"
#include "cudal1/common/template.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::search {
namespace {

// Code without trailing blank lines, so fences close right after it.
std::string code_text(const std::string& code) {
  const auto end = code.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : code.substr(0, end + 1);
}

std::string speedup_text(const ExemplarView& e) {
  if (e.reference) return "the reference itself, speedup 1.00x";
  return fmt::format("speedup {:.2f}x ({})", e.speedup,
                     e.speedup >= 1.0 ? "faster than the reference" : "slower than the reference");
}

// Kernels shown per exemplar with --prompt-profile full.
constexpr std::size_t kPromptKernels = 3;

nlohmann::json percent_or_null(const std::optional<double>& fraction) {
  if (!fraction) return nullptr;
  return fmt::format("{:.0f}", 100 * *fraction);
}

}  // namespace

nlohmann::json profile_values(const std::optional<Profile>& profile, ProfileDetail detail) {
  if (!profile || detail == ProfileDetail::kNone || profile->summary.empty()) return nullptr;
  nlohmann::json values = {
      {"summary", profile->summary},
      {"diagnosis", profile->diagnosis},
      {"time_ms", profile->time_ms},
      {"roof_percent", percent_or_null(profile->roof)},
      {"compute_roof_percent", percent_or_null(profile->compute_roof)},
      {"tflops", profile->achieved_tflops ? nlohmann::json(*profile->achieved_tflops)
                                          : nlohmann::json(nullptr)}};
  nlohmann::json kernels = nlohmann::json::array();
  if (detail == ProfileDetail::kFull) {
    for (const auto& k : profile->kernels) {
      if (kernels.size() >= kPromptKernels) break;
      kernels.push_back({{"name", k.name},
                         {"share_percent", fmt::format("{:.0f}", 100 * k.share)},
                         {"own", k.own}});
    }
  }
  values["kernels"] = std::move(kernels);
  return values;
}

std::string describe_tolerance(const Tolerance& tolerance) {
  const Bounds fp32 = tolerance.for_dtype("float32"), half = tolerance.for_dtype("float16");
  return fmt::format(
      "atol={:g}, rtol={:g} for float32 outputs (atol={:g}, rtol={:g} for float16/bfloat16)",
      fp32.atol, fp32.rtol, half.atol, half.rtol);
}

PromptLibrary PromptLibrary::load(const std::filesystem::path& dir,
                                  const std::string& user_template) {
  PromptLibrary library;
  library.dir_ = dir;
  for (const std::string& name : {std::string("system.md"), user_template}) {
    const auto path = dir / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw InputError(
          fmt::format("prompt template '{}' is missing (pass --prompts DIR with system.md and {})",
                      path.string(), user_template));
    }
  }
  library.system_ = read_file(dir / "system.md");
  library.user_template_ = read_file(dir / user_template);
  // Render once with an empty context now, so a broken template fails here and not mid-run.
  try {
    render_template(library.user_template_, nlohmann::json::object());
  } catch (const TemplateError& e) {
    throw InputError(
        fmt::format("prompt template '{}': {}", (dir / user_template).string(), e.what()));
  }
  return library;
}

std::filesystem::path PromptLibrary::default_dir() {
  if (const char* env = std::getenv("CUDAL1_PROMPTS"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path().parent_path() / "prompts";
    if (std::filesystem::is_regular_file(beside / "contrastive.md", ec)) return beside;
  }
  return CUDAL1_SOURCE_PROMPTS_DIR;
}

std::string PromptLibrary::render_user_message(const PromptContext& context) const {
  // Slowest first, so the list reads as a progression towards the fastest.
  std::vector<ExemplarView> ordered = context.exemplars;
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const ExemplarView& a, const ExemplarView& b) { return a.speedup < b.speedup; });
  nlohmann::json exemplars = nlohmann::json::array();
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    exemplars.push_back({{"label", std::string(1, static_cast<char>('A' + i % 26))},
                         {"code", code_text(ordered[i].code)},
                         {"speedup", ordered[i].speedup},
                         {"speedup_text", speedup_text(ordered[i])},
                         {"reference", ordered[i].reference},
                         {"profile", profile_values(ordered[i].profile, context.profile_detail)}});
  }
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : context.failures) {
    failures.push_back(
        {{"code", code_text(f.code)}, {"status", f.status}, {"error", code_text(f.error)}});
  }
  const nlohmann::json values = {{"task_name", context.task_name},
                                 {"reference_code", code_text(context.reference_code)},
                                 {"device", context.device},
                                 {"tolerance", context.tolerance},
                                 {"exemplars", exemplars},
                                 {"failures", failures},
                                 {"has_exemplars", !exemplars.empty()}};
  return render_template(user_template_, values);
}

llm::ChatRequest PromptLibrary::build(const PromptContext& context, const std::string& model,
                                      double temperature, std::optional<int> max_tokens) const {
  llm::ChatRequest request;
  request.model = model;
  request.temperature = temperature;
  request.max_tokens = max_tokens;
  request.messages = {{"system", system_}, {"user", render_user_message(context)}};
  return request;
}

}  // namespace cudal1::search
