// The result of one evaluation (schema in shared/design.md, "Contract: cudal1 eval").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/eval/flags.hpp"
#include "cudal1/eval/statistics.hpp"

namespace cudal1 {

enum class Status {
  kOk,
  kIncorrect,
  kRejected,
  kCompileError,
  kRuntimeError,
  kTimeout,
  kUnparseable
};

std::string_view to_string(Status status);
std::optional<Status> parse_status(std::string_view text);

// Flag names for the code that raises them; what each does and means is in flags.hpp's table
// (any flag of the reject set forces status "rejected").
namespace flag {
inline constexpr std::string_view kLazyOutput = "lazy_output";
inline constexpr std::string_view kOutputAliasesInput = "output_aliases_input";
// The output is memory an earlier call returned: the caller's earlier result changes under it.
inline constexpr std::string_view kReusedOutput = "reused_output";
inline constexpr std::string_view kInputMutation = "input_mutation";
inline constexpr std::string_view kCachedOutput = "cached_output";
inline constexpr std::string_view kTampering = "tampering";
inline constexpr std::string_view kBackgroundWork = "background_work";
inline constexpr std::string_view kSubPhysicalTime = "sub_physical_time";
inline constexpr std::string_view kTrivialOutput = "trivial_output";
inline constexpr std::string_view kTaskOverride = "task_override";
inline constexpr std::string_view kExtraStreams = "extra_streams";
inline constexpr std::string_view kPrecisionDowncast = "precision_downcast";
inline constexpr std::string_view kNoCustomKernel = "no_custom_kernel";
inline constexpr std::string_view kNoisy = "noisy";
// The reward-checking model (src/review): judged a hack*, judged uncertain, or not reviewed.
inline constexpr std::string_view kReviewRejected = "review_rejected";
inline constexpr std::string_view kReviewUncertain = "review_uncertain";
inline constexpr std::string_view kUnreviewed = "unreviewed";
inline constexpr std::string_view kDegenerate = "degenerate";  // task flag
}  // namespace flag

struct Verdict {
  Status status = Status::kRuntimeError;
  bool correct = false;
  std::optional<double> speedup;
  std::optional<Interval> speedup_ci;
  double reward = 0;
  std::optional<double> reference_ms;
  std::optional<double> candidate_ms;
  std::size_t samples = 0;
  std::optional<double> max_abs_error;
  std::optional<double> max_rel_error;
  std::vector<std::string> flags;
  std::vector<std::string> task_flags;
  nlohmann::json seeds = nlohmann::json::object();
  nlohmann::json device = "cpu";
  std::string log;
  std::string error;  // one line: why the candidate failed (empty when ok)
  nlohmann::json details = nlohmann::json::object();  // timing, build, phases, tolerance, ...

  void add_flag(std::string_view name);
  bool has_flag(std::string_view name) const;
  // Whether the speedup stands as a measurement that rewards, best known results, exemplars and
  // training data may rest on: ok, timed, and no flag of the reject set (finalize() rejects such
  // a verdict; one an older cudal1 stored as ok with one is not trusted either). Uses that need
  // more (a review, a finite speedup) add their condition to this one.
  bool trusted() const;
  // Applies the reject set and the reward rule; call once every finding is in.
  void finalize();

  nlohmann::json to_json() const;
  static Verdict from_json(const nlohmann::json& json);
  // One line for people: "ok 1.87x [1.85, 1.89] ref 1.234 ms cand 0.660 ms (240 samples) ..."
  std::string summary_line() const;
};

// The verdict of a candidate the engine cannot use (not valid Python, no ModelNew): the
// candidate's failure, compile_error, with the first line of `message` as its error.
Verdict unusable_candidate_verdict(std::string_view message);

}  // namespace cudal1
