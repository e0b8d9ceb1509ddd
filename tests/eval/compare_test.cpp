#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cudal1/common/error.hpp"
#include "cudal1/eval/correctness.hpp"
#include "cudal1/eval/tensor_compare.hpp"
#include "cudal1/eval/tolerance.hpp"

namespace cudal1 {
namespace {

template <typename T>
struct Owned {
  std::vector<std::byte> bytes;
  TensorBytes view(const std::string& dtype, std::vector<std::int64_t> shape) const {
    return {dtype, std::move(shape), std::span<const std::byte>(bytes)};
  }
};

template <typename T>
Owned<T> own(const std::vector<T>& values) {
  Owned<T> out;
  out.bytes.resize(values.size() * sizeof(T));
  std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  return out;
}

TEST(Tolerance, DefaultsDependOnDtype) {
  const Tolerance t = Tolerance::parse("");
  EXPECT_DOUBLE_EQ(t.for_dtype("float32").atol, 1e-4);
  EXPECT_DOUBLE_EQ(t.for_dtype("float16").rtol, 1e-2);
  EXPECT_DOUBLE_EQ(t.for_dtype("bfloat16").atol, 1e-2);
  EXPECT_DOUBLE_EQ(t.for_dtype("int64").atol, 0);
}

TEST(Tolerance, NamedAndCustomModes) {
  EXPECT_DOUBLE_EQ(Tolerance::parse("strict").for_dtype("bfloat16").atol, 1e-4);
  EXPECT_DOUBLE_EQ(Tolerance::parse("loose").for_dtype("float32").rtol, 1e-2);
  const Tolerance custom = Tolerance::parse("1e-3,0.05");
  EXPECT_DOUBLE_EQ(custom.for_dtype("float32").atol, 1e-3);
  EXPECT_DOUBLE_EQ(custom.for_dtype("float32").rtol, 0.05);
  for (const char* bad : {"tight", "1e-3", "1e-3,", "a,b", "-1,0", "1,2,3"}) {
    EXPECT_THROW(Tolerance::parse(bad), InputError) << bad;
  }
}

// KernelBench's check, torch.allclose(output, reference, atol=1e-2, rtol=1e-2), for every dtype.
TEST(Tolerance, SpecReadsBackAsTheSameTolerance) {
  // A queue job carries the tolerance as its spec: every mode must survive the trip.
  for (const char* text : {"", "strict", "loose", "kernelbench", "0.001,0.05"}) {
    const Tolerance t = Tolerance::parse(text);
    const Tolerance back = Tolerance::parse(t.spec());
    EXPECT_EQ(back.mode(), t.mode()) << text;
    EXPECT_EQ(back.to_json(), t.to_json()) << text;
    for (const char* dtype : {"float32", "bfloat16", "int64"}) {
      EXPECT_DOUBLE_EQ(back.for_dtype(dtype).atol, t.for_dtype(dtype).atol) << text << dtype;
      EXPECT_DOUBLE_EQ(back.for_dtype(dtype).rtol, t.for_dtype(dtype).rtol) << text << dtype;
    }
  }
}

TEST(Tolerance, KernelBenchPresetIsAllcloseWithOneHundredth) {
  const Tolerance t = Tolerance::parse("kernelbench");
  EXPECT_EQ(t.mode(), Tolerance::Mode::kKernelBench);
  for (const char* dtype : {"float32", "float64", "float16", "bfloat16", "int64", "bool"}) {
    EXPECT_DOUBLE_EQ(t.for_dtype(dtype).atol, 1e-2) << dtype;
    EXPECT_DOUBLE_EQ(t.for_dtype(dtype).rtol, 1e-2) << dtype;
    EXPECT_FALSE(t.for_dtype(dtype).nan_matches_nan) << dtype;
  }
  const auto json = t.to_json();
  EXPECT_EQ(json["mode"], "kernelbench");
  EXPECT_DOUBLE_EQ(json["atol"].get<double>(), 1e-2);
  EXPECT_DOUBLE_EQ(json["rtol"].get<double>(), 1e-2);
  // An fp32 error the default rejects and KernelBench accepts: 5e-3 at a value of 1.
  const auto ref = own<float>({1.0f, 200.0f});
  const auto got = own<float>({1.005f, 201.5f});
  EXPECT_FALSE(compare_tensors(got.view("float32", {2}), ref.view("float32", {2}),
                               Tolerance().for_dtype("float32"))
                   .match);
  EXPECT_TRUE(
      compare_tensors(got.view("float32", {2}), ref.view("float32", {2}), t.for_dtype("float32"))
          .match);
  // And one it rejects too: 0.025 off at 1 is more than 1e-2 + 1e-2 * 1.
  const auto far = own<float>({1.025f, 200.0f});
  EXPECT_FALSE(
      compare_tensors(far.view("float32", {2}), ref.view("float32", {2}), t.for_dtype("float32"))
          .match);
}

TEST(Compare, EqualTensorsMatch) {
  const auto a = own<float>({1, 2, 3, 4});
  const auto c =
      compare_tensors(a.view("float32", {2, 2}), a.view("float32", {2, 2}), {1e-4, 1e-4});
  EXPECT_TRUE(c.match);
  EXPECT_EQ(c.max_abs_error, 0);
  EXPECT_EQ(c.elements, 4u);
}

TEST(Compare, ToleranceIsAbsolutePlusRelative) {
  const auto ref = own<float>({100, 0});
  const auto near = own<float>({100.005f, 0.00009f});  // within 1e-4 + 1e-4*100 and 1e-4
  const auto far = own<float>({100.02f, 0});
  EXPECT_TRUE(
      compare_tensors(near.view("float32", {2}), ref.view("float32", {2}), {1e-4, 1e-4}).match);
  const auto c = compare_tensors(far.view("float32", {2}), ref.view("float32", {2}), {1e-4, 1e-4});
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.mismatched, 1u);
  EXPECT_EQ(c.first_mismatch, 0);
  EXPECT_NEAR(c.max_abs_error, 0.02, 1e-5);
  EXPECT_NEAR(c.max_rel_error, 2e-4, 1e-6);
  EXPECT_NE(c.problem.find("1 of 2 values"), std::string::npos);
}

TEST(Compare, NanMatchesOnlyNan) {
  const auto ref = own<float>({1, NAN, INFINITY});
  const auto same = own<float>({1, NAN, INFINITY});
  const auto nan_for_finite = own<float>({NAN, NAN, INFINITY});
  const auto wrong_inf = own<float>({1, NAN, -INFINITY});
  EXPECT_TRUE(compare_tensors(same.view("float32", {3}), ref.view("float32", {3}), {1, 1}).match);
  const auto c =
      compare_tensors(nan_for_finite.view("float32", {3}), ref.view("float32", {3}), {1, 1});
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.unexpected_nonfinite, 1u);
  EXPECT_TRUE(std::isinf(c.max_abs_error));
  EXPECT_FALSE(
      compare_tensors(wrong_inf.view("float32", {3}), ref.view("float32", {3}), {1, 1}).match);
  // As torch.allclose (the kernelbench preset): NaN matches nothing, not even NaN.
  EXPECT_FALSE(
      compare_tensors(same.view("float32", {3}), ref.view("float32", {3}), {1, 1, false}).match);
}

TEST(Compare, ShapeAndDtypeMustBeIdentical) {
  const auto a = own<float>({1, 2, 3, 4});
  EXPECT_NE(compare_tensors(a.view("float32", {4}), a.view("float32", {2, 2}), {1, 1})
                .problem.find("shape [4]"),
            std::string::npos);
  const auto d = own<double>({1, 2});
  EXPECT_NE(
      compare_tensors(d.view("float64", {2}), own<float>({1, 2, 3, 4}).view("float32", {2}), {1, 1})
          .problem.find("dtype float64"),
      std::string::npos);
}

TEST(Compare, DecodesHalfAndBfloat16) {
  // 1.0, -2.5 and 65504 in IEEE half; 1.0 and -2.5 in bfloat16.
  const auto half = own<std::uint16_t>({0x3C00, 0xC100, 0x7BFF});
  std::vector<double> out;
  decode_scalars(half.view("float16", {3}), 0, 3, out);
  EXPECT_EQ(out, (std::vector<double>{1.0, -2.5, 65504.0}));
  const auto bf = own<std::uint16_t>({0x3F80, 0xC020});
  decode_scalars(bf.view("bfloat16", {2}), 0, 2, out);
  EXPECT_EQ(out, (std::vector<double>{1.0, -2.5}));
}

TEST(Compare, IntegersAndBoolMustMatchExactly) {
  const auto a = own<std::int64_t>({1, 2, 3});
  const auto b = own<std::int64_t>({1, 2, 4});
  EXPECT_FALSE(
      compare_tensors(b.view("int64", {3}), a.view("int64", {3}), Tolerance().for_dtype("int64"))
          .match);
  const auto t = own<std::uint8_t>({1, 0});
  EXPECT_TRUE(compare_tensors(t.view("bool", {2}), t.view("bool", {2}), {}).match);
}

template <typename T>
void expect_last_element_found(const std::string& dtype) {
  std::vector<T> values(300000, T(1));
  const auto ref = own<T>(values);
  values[299999] = T(2);
  const auto got = own<T>(values);
  const auto c =
      compare_tensors(got.view(dtype, {300000}), ref.view(dtype, {300000}), {1e-4, 1e-4});
  EXPECT_EQ(c.first_mismatch, 299999) << dtype;
  EXPECT_EQ(c.mismatched, 1u) << dtype;
  EXPECT_DOUBLE_EQ(c.max_abs_error, 1.0) << dtype;
}

// Every dtype is read in place, to the last element (once decoded in chunks of 65 536).
TEST(Compare, LargeTensorsAreComparedToTheLastElement) {
  expect_last_element_found<float>("float32");
  expect_last_element_found<double>("float64");
  expect_last_element_found<std::int32_t>("int32");
}

TEST(Compare, TruncatedDataNeverMatches) {
  const auto a = own<float>({1, 2, 3});
  EXPECT_FALSE(compare_tensors(a.view("float32", {4}), a.view("float32", {4}), {1, 1}).match);
}

// A spot check's reply: sampled elements of one float32 output drawn from `full_shape`.
wire::Message sampled_reply(const std::vector<float>& values,
                            std::vector<std::int64_t> full_shape) {
  wire::Message m;
  m.header["outputs"] =
      nlohmann::json::array({{{"dtype", "float32"},
                              {"shape", {static_cast<std::int64_t>(values.size())}},
                              {"nbytes", values.size() * sizeof(float)},
                              {"full_shape", full_shape}}});
  m.payload.resize(values.size() * sizeof(float));
  std::memcpy(m.payload.data(), values.data(), m.payload.size());
  return m;
}

TEST(SpotCheck, SampledElementsAndTheShapesTheyCameFrom) {
  const Tolerance tolerance = Tolerance::parse("");
  const auto reference = sampled_reply({1, 2, 3}, {64, 64});
  EXPECT_EQ(compare_sample_outputs(sampled_reply({1, 2, 3}, {64, 64}), reference, tolerance), "");
  EXPECT_NE(compare_sample_outputs(sampled_reply({1, 2, 4}, {64, 64}), reference, tolerance), "");
  // The same sampled values from an output of another shape are not the same answer.
  const std::string problem =
      compare_sample_outputs(sampled_reply({1, 2, 3}, {32, 128}), reference, tolerance);
  EXPECT_NE(problem.find("shape"), std::string::npos) << problem;
}

}  // namespace
}  // namespace cudal1
