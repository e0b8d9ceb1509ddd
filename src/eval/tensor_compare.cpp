#include "cudal1/eval/tensor_compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

namespace cudal1 {
namespace {

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  double value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    value = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -value : value;
}

double bfloat_to_double(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Reads one scalar of a dtype at a byte address, as double; `bytes` is its size.
template <typename T>
struct NativeReader {
  static constexpr std::size_t bytes = sizeof(T);
  double operator()(const std::byte* at) const {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return static_cast<double>(value);
  }
};

template <bool Half>
struct SixteenBitFloatReader {
  static constexpr std::size_t bytes = 2;
  double operator()(const std::byte* at) const {
    std::uint16_t bits;
    std::memcpy(&bits, at, 2);
    return Half ? half_to_double(bits) : bfloat_to_double(bits);
  }
};

// Calls f with the reader of a dtype's scalars (a complex dtype's are its real and imaginary
// parts); throws std::runtime_error for a dtype it cannot read.
template <typename F>
void with_reader(const std::string& type, F&& f) {
  if (type == "float32" || type == "complex64") return f(NativeReader<float>{});
  if (type == "float64" || type == "complex128") return f(NativeReader<double>{});
  if (type == "float16") return f(SixteenBitFloatReader<true>{});
  if (type == "bfloat16") return f(SixteenBitFloatReader<false>{});
  if (type == "int64") return f(NativeReader<std::int64_t>{});
  if (type == "int32") return f(NativeReader<std::int32_t>{});
  if (type == "int16") return f(NativeReader<std::int16_t>{});
  if (type == "int8") return f(NativeReader<std::int8_t>{});
  if (type == "uint8" || type == "bool") return f(NativeReader<std::uint8_t>{});
  if (type == "uint16") return f(NativeReader<std::uint16_t>{});
  if (type == "uint32") return f(NativeReader<std::uint32_t>{});
  if (type == "uint64") return f(NativeReader<std::uint64_t>{});
  throw std::runtime_error("cannot compare tensors of dtype " + type);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::size_t TensorBytes::element_count() const {
  std::size_t n = 1;
  for (auto extent : shape) n *= static_cast<std::size_t>(extent);
  return n;
}

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "bool" || dtype == "int8" || dtype == "uint8") return 1;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16" || dtype == "uint16") return 2;
  if (dtype == "float32" || dtype == "int32" || dtype == "uint32") return 4;
  if (dtype == "float64" || dtype == "int64" || dtype == "uint64" || dtype == "complex64") return 8;
  if (dtype == "complex128") return 16;
  return 0;
}

std::size_t scalar_count(const TensorBytes& t) {
  return t.element_count() * (t.dtype.rfind("complex", 0) == 0 ? 2 : 1);
}

void decode_scalars(const TensorBytes& t, std::size_t first, std::size_t n,
                    std::vector<double>& out) {
  out.clear();
  out.reserve(n);
  with_reader(t.dtype, [&](auto read) {
    const std::byte* d = t.bytes.data() + first * read.bytes;
    for (std::size_t i = 0; i < n; ++i) out.push_back(read(d + i * read.bytes));
  });
}

double TensorComparison::relative_l2_error() const {
  if (sum_sq_reference == 0) return sum_sq_diff == 0 ? 0.0 : INFINITY;
  return std::sqrt(sum_sq_diff / sum_sq_reference);
}

TensorComparison compare_tensors(const TensorBytes& candidate, const TensorBytes& reference,
                                 Bounds bounds) {
  TensorComparison result;
  if (candidate.dtype != reference.dtype) {
    result.match = false;
    result.problem =
        fmt::format("dtype {} differs from the reference's {}", candidate.dtype, reference.dtype);
    return result;
  }
  if (candidate.shape != reference.shape) {
    result.match = false;
    result.problem = fmt::format("shape {} differs from the reference's {}",
                                 shape_text(candidate.shape), shape_text(reference.shape));
    return result;
  }
  if (dtype_size(reference.dtype) == 0) {
    result.match = false;
    result.problem = "outputs of dtype " + reference.dtype + " cannot be compared";
    return result;
  }
  const std::size_t expected_bytes = reference.element_count() * dtype_size(reference.dtype);
  if (candidate.bytes.size() != expected_bytes || reference.bytes.size() != expected_bytes) {
    result.match = false;
    result.problem = "output data is truncated";
    return result;
  }
  double first_got = 0, first_expected = 0;
  result.elements = scalar_count(reference);
  const auto check = [&](double a, double b, std::size_t index) {
    bool ok;
    if (std::isnan(b)) {
      ok = bounds.nan_matches_nan && std::isnan(a);
    } else if (std::isinf(b)) {
      ok = a == b;
    } else if (!std::isfinite(a)) {
      ok = false;
      ++result.unexpected_nonfinite;
    } else {
      const double diff = std::fabs(a - b);
      result.sum_sq_diff += diff * diff;
      result.sum_sq_reference += b * b;
      result.max_abs_error = std::max(result.max_abs_error, diff);
      if (b != 0) result.max_rel_error = std::max(result.max_rel_error, diff / std::fabs(b));
      ok = diff <= bounds.atol + bounds.rtol * std::fabs(b);
    }
    if (!ok) {
      if (result.first_mismatch < 0) {
        result.first_mismatch = static_cast<std::int64_t>(index);
        first_got = a;
        first_expected = b;
      }
      ++result.mismatched;
    }
  };
  // Read in place, scalar by scalar: no copy of a 32 MB output (compared at every timing spot
  // check) in another form.
  with_reader(reference.dtype, [&](auto read) {
    const std::byte* c = candidate.bytes.data();
    const std::byte* r = reference.bytes.data();
    for (std::size_t i = 0; i < result.elements; ++i)
      check(read(c + i * read.bytes), read(r + i * read.bytes), i);
  });
  if (result.unexpected_nonfinite > 0) {
    result.max_abs_error = INFINITY;
    result.max_rel_error = INFINITY;
  }
  if (result.mismatched > 0) {
    result.match = false;
    result.problem = fmt::format(
        "{} of {} values outside atol={:g}, rtol={:g} ({} NaN/Inf where the reference is finite); "
        "first at flat index {}: got {:.6g}, expected {:.6g}; max abs error {:.3g}",
        result.mismatched, result.elements, bounds.atol, bounds.rtol, result.unexpected_nonfinite,
        result.first_mismatch, first_got, first_expected, result.max_abs_error);
  }
  return result;
}

}  // namespace cudal1
