#include "cudal1/eval/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <stdexcept>

#include "cudal1/common/log_trim.hpp"

namespace cudal1 {
namespace {

// Shares at or above this make one kernel (or the memory roof) the call's story.
constexpr double kDominant = 0.5;
constexpr double kNearRoof = 0.6;
// Above this share of the compute roof, a call does less arithmetic than the reference's.
constexpr double kLessArithmetic = 1.2;
// Long template names say little past their start (first_line cuts them).
constexpr std::size_t kNameLimit = 90;

std::optional<double> positive(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  const double value = object[key].get<double>();
  if (!std::isfinite(value) || value <= 0) return std::nullopt;
  return value;
}

// Kernels of cuBLAS, cuDNN and CUTLASS (the libraries PyTorch calls for matmuls and
// convolutions) by their names; PyTorch's own (at::native::...) are not among them.
bool vendor_library_kernel(const std::string& name) {
  static const std::regex pattern(
      "cublas|cudnn|cutlass|gemm|gemv|xmma|implicit_convolve|nvjet|sm[0-9]{2}_|ampere_|hopper_|"
      "volta_|turing_",
      std::regex::icase);
  return std::regex_search(name, pattern);
}

std::string bytes_text(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.1f} kB", bytes / 1e3);
}

std::string rate_text(double gbs) {
  if (gbs >= 1000) return fmt::format("{:.2f} TB/s", gbs / 1000);
  if (gbs >= 10) return fmt::format("{:.0f} GB/s", gbs);
  return fmt::format("{:.2g} GB/s", gbs);
}

std::string time_text(double ms) {
  if (ms >= 100) return fmt::format("{:.0f} ms", ms);
  if (ms >= 1) return fmt::format("{:.2f} ms", ms);
  return fmt::format("{:.1f} us", ms * 1000);
}

std::string percent(double fraction) {
  return fmt::format("{:.0f}%", 100 * fraction);
}

std::string flops_text(double flops) {
  if (flops >= 1e12) return fmt::format("{:.2f} TFLOP", flops / 1e12);
  if (flops >= 1e9) return fmt::format("{:.2f} GFLOP", flops / 1e9);
  return fmt::format("{:.1f} MFLOP", flops / 1e6);
}

std::string tflops_text(double tflops) {
  if (tflops >= 1) return fmt::format("{:.1f} TFLOP/s", tflops);
  return fmt::format("{:.0f} GFLOP/s", tflops * 1e3);
}

// The reference's arithmetic against the measured roof: (flops, floor ms). Every precision it ran
// in must have a measured throughput, else there is no roof (float64 is never measured).
std::optional<std::pair<double, double>> compute_floor(const nlohmann::json& record) {
  const auto total = positive(record, "per_call");
  const auto& by = record.value("by_precision", nlohmann::json::object());
  const auto& peaks = record.value("peak_tflops", nlohmann::json::object());
  if (!total || !by.is_object() || !peaks.is_object()) return std::nullopt;
  double floor_ms = 0;
  for (const auto& [precision, flops] : by.items()) {
    if (!flops.is_number()) return std::nullopt;
    if (flops.get<double>() <= 0) continue;
    const auto peak = positive(peaks, precision.c_str());
    if (!peak) return std::nullopt;
    floor_ms += flops.get<double>() / (*peak * 1e9);
  }
  if (floor_ms <= 0) return std::nullopt;
  return std::make_pair(*total, floor_ms);
}

// The diagnosis and the sentence that says it.
std::pair<std::string, std::string> diagnose(const Profile& p, std::string_view side) {
  const bool compute_first = p.compute_roof && (!p.roof || *p.compute_roof > *p.roof);
  if (compute_first && *p.compute_roof > kLessArithmetic) {
    return {"less arithmetic than the reference",
            fmt::format("{:.1f} times faster than the reference's arithmetic runs at the "
                        "measured roof: it computes the same outputs with less arithmetic",
                        *p.compute_roof)};
  }
  if (compute_first && *p.compute_roof >= kNearRoof) {
    return {"compute-bound near the roof",
            "compute-bound near the roof: only less arithmetic, or a faster precision the "
            "tolerance allows, makes it much faster"};
  }
  if (p.roof && *p.roof >= kNearRoof) {
    return {"memory-bound near the roof",
            "memory-bound near the roof: only moving fewer bytes makes it much faster"};
  }
  if (p.busy && *p.busy < kDominant) {
    return {"launch-bound",
            fmt::format("launch-bound: the device runs kernels {} of the call ({:.0f} launch{} "
                        "per call); the rest is launch overhead and gaps",
                        percent(*p.busy), p.kernels_per_call.value_or(0),
                        p.kernels_per_call.value_or(0) == 1 ? "" : "es")};
  }
  if (!p.kernels.empty() && p.kernels.front().share >= kDominant) {
    const KernelShare& top = p.kernels.front();
    if (!top.own && vendor_library_kernel(top.name)) {
      return {"library-bound",
              fmt::format("library-bound: {} of the kernel time in the library kernel {}",
                          percent(top.share), first_line(top.name, kNameLimit))};
    }
    if (top.own) {
      return {"own kernel below the roof",
              fmt::format("{} of the kernel time in its own kernel {}, well under the memory "
                          "roof: compute- or latency-bound there",
                          percent(top.share), first_line(top.name, kNameLimit))};
    }
    return {"one kernel", fmt::format("{} of the kernel time in {}{}", percent(top.share),
                                      first_line(top.name, kNameLimit),
                                      side == "candidate" ? " (not one of its own kernels)" : "")};
  }
  if (p.kernels.size() > 1) {
    return {"spread over kernels",
            fmt::format("kernel time spread over several kernels, the longest {} ({})",
                        first_line(p.kernels.front().name, kNameLimit),
                        percent(p.kernels.front().share))};
  }
  if (p.roof) return {"below the roof", "well under the memory roof"};
  return {"", ""};
}

}  // namespace

nlohmann::json Profile::to_json() const {
  nlohmann::json out = {{"time_ms", time_ms}, {"diagnosis", diagnosis}, {"summary", summary}};
  const auto put = [&](const char* key, const std::optional<double>& value) {
    if (value) out[key] = *value;
  };
  put("bytes", bytes);
  put("peak_gbs", peak_gbs);
  put("achieved_gbs", achieved_gbs);
  put("roof", roof);
  put("flops", flops);
  put("peak_tflops", peak_tflops);
  put("achieved_tflops", achieved_tflops);
  put("compute_roof", compute_roof);
  put("busy", busy);
  put("kernels_per_call", kernels_per_call);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& k : kernels) {
    list.push_back(
        {{"name", k.name}, {"share", k.share}, {"ms_per_call", k.ms_per_call}, {"own", k.own}});
  }
  out["kernels"] = std::move(list);
  return out;
}

std::optional<Profile> Profile::from_json(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("time_ms") || !json["time_ms"].is_number())
    return std::nullopt;
  Profile p;
  p.time_ms = json["time_ms"].get<double>();
  p.bytes = positive(json, "bytes");
  p.peak_gbs = positive(json, "peak_gbs");
  p.achieved_gbs = positive(json, "achieved_gbs");
  p.roof = positive(json, "roof");
  p.flops = positive(json, "flops");
  p.peak_tflops = positive(json, "peak_tflops");
  p.achieved_tflops = positive(json, "achieved_tflops");
  p.compute_roof = positive(json, "compute_roof");
  p.busy = positive(json, "busy");
  p.kernels_per_call = positive(json, "kernels_per_call");
  for (const auto& k : json.value("kernels", nlohmann::json::array())) {
    if (!k.is_object()) continue;
    p.kernels.push_back({k.value("name", ""), k.value("share", 0.0), k.value("ms_per_call", 0.0),
                         k.value("own", false)});
  }
  p.diagnosis = json.value("diagnosis", "");
  p.summary = json.value("summary", "");
  return p;
}

std::optional<Profile> profile_of(const nlohmann::json& verdict, std::string_view side) {
  if (!verdict.is_object()) return std::nullopt;
  const auto time = positive(verdict, fmt::format("{}_ms", side).c_str());
  if (!time) return std::nullopt;
  Profile p;
  p.time_ms = *time;
  const auto& light = verdict.value("speed_of_light", nlohmann::json::object());
  p.bytes = positive(light, "bytes");
  p.peak_gbs = positive(light, "bandwidth_gbs");
  if (p.bytes) p.achieved_gbs = *p.bytes / (p.time_ms * 1e6);
  if (p.achieved_gbs && p.peak_gbs) p.roof = *p.achieved_gbs / *p.peak_gbs;
  const auto& arithmetic = verdict.value("flops", nlohmann::json::object());
  p.flops = positive(arithmetic, "per_call");
  if (p.flops) p.achieved_tflops = *p.flops / (p.time_ms * 1e9);
  if (const auto floor = compute_floor(arithmetic)) {
    p.peak_tflops = floor->first / (floor->second * 1e9);
    p.compute_roof = floor->second / p.time_ms;
  }
  const auto& timing = verdict.value("timing", nlohmann::json::object());
  const auto& activity = timing.is_object()
                             ? timing.value("activity", nlohmann::json::object())
                                   .value(std::string(side), nlohmann::json::object())
                             : nlohmann::json::object();
  if (const auto busy_ms = positive(activity, "busy_ms_median"))
    p.busy = std::min(1.0, *busy_ms / p.time_ms);
  p.kernels_per_call = positive(activity, "kernels_per_call");
  for (const auto& k : activity.value("top_kernels", nlohmann::json::array())) {
    if (p.kernels.size() >= Profile::kMaxKernels) break;
    if (!k.is_object()) continue;
    p.kernels.push_back({k.value("name", ""), k.value("share", 0.0), k.value("ms_per_call", 0.0),
                         side == "candidate" && k.value("own", false)});
  }
  auto [diagnosis, sentence] = diagnose(p, side);
  p.diagnosis = diagnosis;
  std::string summary = fmt::format("{} per call", time_text(p.time_ms));
  if (p.bytes && p.achieved_gbs) {
    summary += fmt::format("; moves {} (every input read and output written once) at {}",
                           bytes_text(*p.bytes), rate_text(*p.achieved_gbs));
    if (p.roof && p.peak_gbs)
      summary += fmt::format(", {} of the measured {}", percent(*p.roof), rate_text(*p.peak_gbs));
  }
  if (p.flops && p.achieved_tflops) {
    summary += fmt::format("; {} {} of arithmetic per call at {}",
                           side == "candidate" ? "does the reference's" : "does",
                           flops_text(*p.flops), tflops_text(*p.achieved_tflops));
    if (p.compute_roof && p.peak_tflops)
      summary += fmt::format(", {} of the measured {}", percent(*p.compute_roof),
                             tflops_text(*p.peak_tflops));
  }
  if (!sentence.empty()) summary += "; " + sentence;
  p.summary = summary;
  return p;
}

std::optional<double> Profile::of_roof() const {
  if (roof && compute_roof) return std::max(*roof, *compute_roof);
  return roof ? roof : compute_roof;
}

std::optional<Profile> stored_profile(const nlohmann::json& verdict, std::string_view side) {
  if (verdict.is_object() && verdict.contains("profile") && verdict["profile"].is_object()) {
    const auto& stored = verdict["profile"];
    if (stored.contains(std::string(side))) return Profile::from_json(stored[std::string(side)]);
  }
  return profile_of(verdict, side);
}

ProfileDetail parse_profile_detail(const std::string& text) {
  if (text == "none") return ProfileDetail::kNone;
  if (text == "summary") return ProfileDetail::kSummary;
  if (text == "full") return ProfileDetail::kFull;
  throw std::invalid_argument(
      fmt::format("unknown prompt profile '{}' (none, summary or full)", text));
}

}  // namespace cudal1
