#include "cudal1/review/review_prompt.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/template.hpp"
#include "cudal1/common/text_file.hpp"
#include "resources.hpp"

namespace cudal1::review {
namespace {

using nlohmann::json;

// Bounds on what one prompt carries: the candidate and task whole in any realistic case, each
// hack case long enough to show its trick.
constexpr std::size_t kCodeHalf = 20000;
constexpr std::size_t kCaseHalf = 3000;

std::string code_text(const std::string& code, std::size_t half) {
  const std::string trimmed = trim_log(code, half, half);
  const auto end = trimmed.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : trimmed.substr(0, end + 1);
}

std::string join(const std::vector<std::string>& items, const char* empty) {
  if (items.empty()) return empty;
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string_view feature_description(std::string_view name) {
  for (const auto& f : api_feature_catalog()) {
    if (f.name == name) return f.description;
  }
  return {};
}

std::string describe_feature(std::string_view name) {
  return fmt::format("{} ({})", name, feature_description(name));
}

json similar_case_values(const std::vector<SimilarCase>& similar) {
  json out = json::array();
  for (const SimilarCase& s : similar) {
    std::vector<std::string> shared;
    for (const auto& f : s.similarity.shared_api) shared.push_back(describe_feature(f));
    out.push_back({{"name", s.hack_case->name},
                   {"class", s.hack_case->hack_class},
                   {"score", s.similarity.score},
                   {"score_text", fmt::format("{:.2f}", s.similarity.score)},
                   {"description", s.hack_case->description},
                   // null, not "": an empty string would still open {{#shared_features}}
                   {"shared_features", shared.empty() ? json(nullptr) : json(join(shared, ""))},
                   {"code", code_text(s.hack_case->source, kCaseHalf)}});
  }
  return out;
}

json class_values() {
  json out = json::array();
  for (const auto& c : known_hack_classes()) {
    out.push_back({{"name", c.name}, {"description", c.description}});
  }
  return out;
}

// A JSON value as text: strings without their quotes.
std::string text_of(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string optional_ms(const std::optional<double>& ms) {
  return ms ? fmt::format("{:.4g} ms", *ms) : "-";
}

void describe_activity(const json& timing, std::string& out) {
  if (timing.contains("kernel_time_speedup") && timing["kernel_time_speedup"].is_number()) {
    out += fmt::format("- kernel-time speedup (CUPTI, kernels only, no launch overhead): {:.3f}x\n",
                       timing["kernel_time_speedup"].get<double>());
  }
  if (!timing.contains("activity") || !timing["activity"].is_object()) return;
  for (const char* side : {"reference", "candidate"}) {
    const json& a = timing["activity"].value(side, json::object());
    if (!a.is_object()) continue;
    out += fmt::format(
        "- {}: median kernel time {} ms, {} kernels per call, {} kernels and {} copies outside "
        "the timed windows, streams {}\n",
        side, a.value("busy_ms_median", json()).dump(), a.value("kernels_per_call", json()).dump(),
        a.value("kernels_outside_windows", 0), a.value("copies_outside_windows", 0),
        a.value("streams", json::array()).dump());
    const auto names = a.value("kernel_names", std::vector<std::string>{});
    if (!names.empty()) {
      std::vector<std::string> first(names.begin(),
                                     names.begin() + std::min<std::ptrdiff_t>(8, names.size()));
      out += fmt::format("  kernels: {}\n", join(first, ""));
    }
  }
}

}  // namespace

std::string describe_measurement(const Verdict& verdict) {
  std::string out;
  out += fmt::format("- status: {}, correct: {}", to_string(verdict.status), verdict.correct);
  const json trials = verdict.details.value("trials", json());
  if (trials.is_array()) out += fmt::format(" on {} correctness trials", trials.size());
  if (verdict.max_abs_error) out += fmt::format(", max abs error {:.3g}", *verdict.max_abs_error);
  out += "\n";
  if (verdict.speedup) {
    out += fmt::format("- speedup {:.3f}x", *verdict.speedup);
    if (verdict.speedup_ci) {
      out += fmt::format(" (95% interval [{:.3f}, {:.3f}])", verdict.speedup_ci->low,
                         verdict.speedup_ci->high);
    }
    out += fmt::format(": reference {} vs candidate {} (medians of {} sample pairs)\n",
                       optional_ms(verdict.reference_ms), optional_ms(verdict.candidate_ms),
                       verdict.samples);
  }
  const json timing = verdict.details.value("timing", json::object());
  if (timing.is_object()) {
    describe_activity(timing, out);
    if (timing.contains("relative_noise") && timing["relative_noise"].is_number()) {
      out += fmt::format("- relative noise of the speedup: {:.2f}% (stop: {})\n",
                         100 * timing["relative_noise"].get<double>(),
                         text_of(timing.value("stop", json("-"))));
    }
  }
  if (verdict.device.is_object()) {
    out += fmt::format("- device: {}\n", text_of(verdict.device.value("name", json("a GPU"))));
  } else {
    out += "- device: the CPU (cudal1 eval --device cpu)\n";
  }
  out += fmt::format("- flags: {}", join(verdict.flags, "none"));
  if (!verdict.task_flags.empty())
    out += fmt::format("; task flags: {}", join(verdict.task_flags, ""));
  return out;
}

ReviewPrompt ReviewPrompt::load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError(
        fmt::format("review prompt template '{}' is missing (set CUDAL1_PROMPTS to a "
                    "directory with review.md)",
                    file.string()));
  }
  ReviewPrompt prompt;
  prompt.file_ = file;
  prompt.template_ = read_file(file);
  // Rendered once now, so a broken template fails before any evaluation runs.
  try {
    render_template(prompt.template_, json::object());
  } catch (const TemplateError& e) {
    throw InputError(fmt::format("review prompt template '{}': {}", file.string(), e.what()));
  }
  return prompt;
}

std::filesystem::path ReviewPrompt::default_file() {
  if (const char* env = std::getenv("CUDAL1_PROMPTS"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env) / "review.md";
  }
  return locate_resource("prompts/review.md", "prompts/review.md");
}

std::string ReviewPrompt::render(const ReviewSubject& subject, const Verdict& verdict,
                                 const std::string& reason,
                                 const std::vector<SimilarCase>& similar) const {
  json features = json::array();
  const CodeFingerprint candidate = CodeFingerprint::of(subject.candidate_code);
  for (const auto& name : candidate.api_features()) {
    features.push_back({{"name", name}, {"description", feature_description(name)}});
  }
  const json values = {
      {"task_name", subject.task_name},
      {"task_code", code_text(subject.task_code, kCodeHalf)},
      {"candidate_code", code_text(subject.candidate_code, kCodeHalf)},
      {"reason", reason},
      {"speedup_text", verdict.speedup ? fmt::format("{:.2f}x", *verdict.speedup) : "-"},
      {"measurement", describe_measurement(verdict)},
      {"flags_text", join(verdict.flags, "none")},
      {"candidate_features", features},
      {"similar_cases", similar_case_values(similar)},
      {"classes", class_values()},
  };
  return render_template(template_, values);
}

}  // namespace cudal1::review
