// Element-wise comparison of a candidate's output with the reference's, on raw bytes copied out
// of the worker processes. Nothing a candidate can patch takes part in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cudal1/eval/tolerance.hpp"

namespace cudal1 {

struct TensorBytes {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;  // compact row-major

  std::size_t element_count() const;
};

struct TensorComparison {
  bool match = true;
  std::string problem;  // why it does not match, for the verdict log
  double max_abs_error = 0;
  double max_rel_error = 0;              // over elements whose reference is non-zero
  std::size_t mismatched = 0;            // elements outside tolerance
  std::size_t unexpected_nonfinite = 0;  // NaN/Inf where the reference is finite
  std::size_t elements = 0;
  std::int64_t first_mismatch = -1;
  // Over finite elements: sum of squared differences and of squared reference values, for the
  // error relative to the reference's own scale (an output that passes an absolute tolerance only
  // because the reference is tiny still has a relative error near 1).
  double sum_sq_diff = 0;
  double sum_sq_reference = 0;

  // ||candidate - reference|| / ||reference||; 0 when both are zero, infinity when only the
  // reference is zero.
  double relative_l2_error() const;
};

// Element size in bytes of a dtype name, or 0 when unknown.
std::size_t dtype_size(const std::string& dtype);

// Decodes `count` scalars starting at scalar `first` to double. A complex element is two scalars
// (real, imaginary). Throws std::runtime_error for an unknown dtype.
void decode_scalars(const TensorBytes& tensor, std::size_t first, std::size_t count,
                    std::vector<double>& out);

// Scalars in a tensor: elements, or twice that for complex dtypes.
std::size_t scalar_count(const TensorBytes& tensor);

// |candidate - reference| <= atol + rtol * |reference| element-wise; shapes and dtypes must be
// identical; NaN matches only NaN (or nothing, without bounds.nan_matches_nan), infinities only
// the same infinity.
TensorComparison compare_tensors(const TensorBytes& candidate, const TensorBytes& reference,
                                 Bounds bounds);

}  // namespace cudal1
