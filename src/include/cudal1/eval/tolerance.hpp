// How close a candidate's outputs must be to the reference's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cudal1 {

struct Bounds {
  double atol = 0;
  double rtol = 0;
  // NaN in the reference is matched by NaN in the candidate. torch.allclose (KernelBench's check)
  // matches NaN with nothing, so the kernelbench preset turns this off.
  bool nan_matches_nan = true;
};

class Tolerance {
 public:
  enum class Mode { kByDtype, kStrict, kLoose, kKernelBench, kCustom };

  // "strict" (1e-4 for every floating type), "loose" (1e-2), "kernelbench" (KernelBench's own
  // check: torch.allclose(output, reference, atol=1e-2, rtol=1e-2) for every output, whatever its
  // dtype), "ATOL,RTOL", or "" / "default" (1e-4 for fp32/fp64 outputs, 1e-2 for fp16/bf16).
  // Throws InputError otherwise.
  static Tolerance parse(std::string_view text);

  // Bounds for an output of the given dtype name ("float32", "bfloat16", "int64", ...).
  // Integer and bool outputs must match exactly unless a custom tolerance was given.
  Bounds for_dtype(const std::string& dtype) const;
  Mode mode() const { return mode_; }
  // The text parse() reads back into this tolerance ("", "strict", "loose", "kernelbench",
  // "ATOL,RTOL"): how a queue job carries it to its worker.
  std::string spec() const;
  nlohmann::json to_json() const;

 private:
  Mode mode_ = Mode::kByDtype;
  Bounds custom_;
};

}  // namespace cudal1
