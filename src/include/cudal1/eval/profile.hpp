// Where one side's time goes, from what an evaluation already measured (nothing is timed for it):
// the time per call, the bytes a call must move against the device's measured bandwidth, the
// reference's arithmetic against its measured matmul throughput, the device time per kernel, and
// a one-line diagnosis. Contrastive prompts show it next to each
// exemplar's speedup, the report shows the share of the roof, and it is kept in the verdict.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudal1 {

struct KernelShare {
  std::string name;
  double share = 0;        // of the call's kernel time
  double ms_per_call = 0;  // device time per timed call
  bool own = false;        // one of the candidate's own kernels (built or named by it)
};

struct Profile {
  double time_ms = 0;                  // the side's time per call (the verdict's median)
  std::optional<double> bytes;         // every input read and every output written once
  std::optional<double> peak_gbs;      // the device's measured copy bandwidth
  std::optional<double> achieved_gbs;  // bytes / time
  std::optional<double> roof;          // achieved / peak
  // The reference's arithmetic (matrix products, convolutions, attention) per call, and the time
  // it takes at the device's measured matmul throughput in the precisions it ran in. A candidate
  // is held to the reference's arithmetic: above 1, it does less than the reference does.
  std::optional<double> flops;
  std::optional<double> peak_tflops;      // flops / compute floor: the mix's measured roof
  std::optional<double> achieved_tflops;  // flops / time
  std::optional<double> compute_roof;     // achieved / peak
  std::optional<double> busy;             // kernel time / call time (GPU, traced calls)
  std::optional<double> kernels_per_call;
  std::vector<KernelShare> kernels;  // longest first, at most kMaxKernels
  std::string diagnosis;             // "memory-bound near the roof", "launch-bound", ...
  std::string summary;               // one line: time, bandwidth against the roof, diagnosis

  static constexpr std::size_t kMaxKernels = 5;

  // The nearer roof, memory or arithmetic (the report's "of roof"); null with neither.
  std::optional<double> of_roof() const;

  nlohmann::json to_json() const;
  static std::optional<Profile> from_json(const nlohmann::json& json);
};

// The profile of `side` ("candidate" or "reference") from a verdict's JSON (Verdict::to_json):
// null when the verdict holds no time for that side.
std::optional<Profile> profile_of(const nlohmann::json& verdict, std::string_view side);

// The verdict's stored profile of `side` (verdict["profile"][side]), else one made from its
// measurements now (verdicts stored before profiles were kept).
std::optional<Profile> stored_profile(const nlohmann::json& verdict, std::string_view side);

// How much of a profile a prompt shows: none, summary (one line), full (and the top kernels).
enum class ProfileDetail { kNone, kSummary, kFull };
ProfileDetail parse_profile_detail(const std::string& text);  // throws std::invalid_argument

}  // namespace cudal1
