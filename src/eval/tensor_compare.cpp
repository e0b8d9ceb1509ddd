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

template <typename T>
void decode_as(const std::byte* data, std::size_t count, std::vector<double>& out) {
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(value));
  }
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
  const std::string& type = t.dtype;
  const std::size_t scalar_bytes = type == "complex64"    ? 4
                                   : type == "complex128" ? 8
                                                          : dtype_size(type);
  if (scalar_bytes == 0) throw std::runtime_error("cannot compare tensors of dtype " + type);
  const std::byte* d = t.bytes.data() + first * scalar_bytes;
  if (type == "float32" || type == "complex64") return decode_as<float>(d, n, out);
  if (type == "float64" || type == "complex128") return decode_as<double>(d, n, out);
  if (type == "int64") return decode_as<std::int64_t>(d, n, out);
  if (type == "int32") return decode_as<std::int32_t>(d, n, out);
  if (type == "int16") return decode_as<std::int16_t>(d, n, out);
  if (type == "int8") return decode_as<std::int8_t>(d, n, out);
  if (type == "uint8" || type == "bool") return decode_as<std::uint8_t>(d, n, out);
  if (type == "uint16") return decode_as<std::uint16_t>(d, n, out);
  if (type == "uint32") return decode_as<std::uint32_t>(d, n, out);
  if (type == "uint64") return decode_as<std::uint64_t>(d, n, out);
  if (type == "float16" || type == "bfloat16") {
    const bool half = type == "float16";
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, d + 2 * i, 2);
      out.push_back(half ? half_to_double(bits) : bfloat_to_double(bits));
    }
    return;
  }
  throw std::runtime_error("cannot compare tensors of dtype " + type);
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
      ok = std::isnan(a);
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
  if (reference.dtype == "float32") {
    // The common case, read in place (a 32 MB output is compared at every timing spot check).
    const std::byte* c = candidate.bytes.data();
    const std::byte* r = reference.bytes.data();
    for (std::size_t i = 0; i < result.elements; ++i) {
      float a, b;
      std::memcpy(&a, c + 4 * i, 4);
      std::memcpy(&b, r + 4 * i, 4);
      check(a, b, i);
    }
  } else {
    // Decoded in chunks so a multi-gigabyte output does not need twice its size again in doubles.
    constexpr std::size_t kChunk = 1u << 16;
    std::vector<double> c, r;
    for (std::size_t base = 0; base < result.elements; base += kChunk) {
      const std::size_t n = std::min(kChunk, result.elements - base);
      decode_scalars(candidate, base, n, c);
      decode_scalars(reference, base, n, r);
      for (std::size_t k = 0; k < n; ++k) check(c[k], r[k], base + k);
    }
  }
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
