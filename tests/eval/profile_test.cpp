#include "cudal1/eval/profile.hpp"

#include <gtest/gtest.h>

namespace cudal1 {
namespace {

// A verdict as Verdict::to_json writes it, with the fields a profile reads.
nlohmann::json gpu_verdict(double candidate_ms, double bytes, double peak_gbs,
                           nlohmann::json candidate_activity,
                           nlohmann::json reference_activity = nlohmann::json::object()) {
  return {{"status", "ok"},
          {"reference_ms", 4 * candidate_ms},
          {"candidate_ms", candidate_ms},
          {"speed_of_light", {{"bytes", bytes}, {"bandwidth_gbs", peak_gbs}}},
          {"timing",
           {{"activity",
             {{"candidate", std::move(candidate_activity)},
              {"reference", std::move(reference_activity)}}}}}};
}

nlohmann::json kernel(const std::string& name, double share, bool own) {
  return {{"name", name}, {"share", share}, {"ms_per_call", share * 0.1}, {"own", own}};
}

TEST(Profile, NearTheRoofIsMemoryBound) {
  // 805 MB in 0.215 ms: 3.74 TB/s of a measured 4.8 TB/s.
  const auto v = gpu_verdict(0.215, 805e6, 4800,
                             {{"busy_ms_median", 0.21},
                              {"kernels_per_call", 1},
                              {"top_kernels", {kernel("ln_normalize_kernel<true>", 1.0, true)}}});
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->diagnosis, "memory-bound near the roof");
  ASSERT_TRUE(p->roof);
  EXPECT_NEAR(*p->roof, 805e6 / 0.215e6 / 4800, 1e-9);
  EXPECT_NE(p->summary.find("805.0 MB"), std::string::npos) << p->summary;
  EXPECT_NE(p->summary.find("3.74 TB/s, 78% of the measured 4.80 TB/s"), std::string::npos)
      << p->summary;
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_TRUE(p->kernels[0].own);
}

TEST(Profile, IdleDeviceIsLaunchBound) {
  const auto v = gpu_verdict(0.05, 1e6, 3000,
                             {{"busy_ms_median", 0.01},
                              {"kernels_per_call", 12},
                              {"top_kernels", {kernel("elementwise_kernel", 0.6, false)}}});
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->diagnosis, "launch-bound");
  EXPECT_NE(p->summary.find("20% of the call (12 launches per call)"), std::string::npos)
      << p->summary;
}

TEST(Profile, LibraryKernelAndOwnKernelAreTold) {
  const auto v = gpu_verdict(
      1.0, 1e6, 3000,
      {{"busy_ms_median", 0.95},
       {"kernels_per_call", 2},
       {"top_kernels", {kernel("fused_gemm_bias_kernel", 0.8, true), kernel("copy", 0.2, false)}}},
      {{"busy_ms_median", 3.9},
       {"kernels_per_call", 3},
       {"top_kernels", {kernel("sm90_xmma_gemm_f32f32_tf32f32", 0.9, false)}}});
  const auto candidate = profile_of(v, "candidate");
  const auto reference = profile_of(v, "reference");
  ASSERT_TRUE(candidate && reference);
  EXPECT_EQ(candidate->diagnosis, "own kernel below the roof");
  EXPECT_NE(candidate->summary.find("its own kernel fused_gemm_bias_kernel"), std::string::npos);
  EXPECT_EQ(reference->diagnosis, "library-bound");
  EXPECT_DOUBLE_EQ(reference->time_ms, 4.0);
  // The reference's kernels are never "its own".
  EXPECT_FALSE(reference->kernels[0].own);
}

TEST(Profile, CpuVerdictHasTheRoofAlone) {
  const nlohmann::json v = {{"candidate_ms", 450.0},
                            {"reference_ms", 460.0},
                            {"speed_of_light", {{"bytes", 67108864.0}, {"bandwidth_gbs", 35.0}}}};
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->busy);
  EXPECT_TRUE(p->kernels.empty());
  EXPECT_EQ(p->diagnosis, "below the roof");
  EXPECT_NE(p->summary.find("450 ms per call"), std::string::npos) << p->summary;
}

// A GEMM task: 2 x 4096^3 FLOP per call in float32, the device measured at 50 TFLOP/s (float32)
// and 400 (TF32).
nlohmann::json with_flops(nlohmann::json verdict, nlohmann::json by_precision) {
  double total = 0;
  for (const auto& [precision, flops] : by_precision.items()) total += flops.get<double>();
  verdict["flops"] = {{"per_call", total},
                      {"by_precision", std::move(by_precision)},
                      {"peak_tflops", {{"float32", 50.0}, {"tf32", 400.0}}}};
  return verdict;
}

TEST(Profile, ArithmeticAgainstTheMatmulRoof) {
  const double flops = 2.0 * 4096 * 4096 * 4096;  // 137.4 GFLOP: 2.75 ms at 50 TFLOP/s
  const auto v =
      with_flops(gpu_verdict(3.0, 201e6, 3000,
                             {{"busy_ms_median", 2.95},
                              {"kernels_per_call", 1},
                              {"top_kernels", {kernel("sm90_xmma_gemm_f32f32", 1.0, false)}}},
                             {{"busy_ms_median", 11.9},
                              {"kernels_per_call", 1},
                              {"top_kernels", {kernel("sm90_xmma_gemm_f32f32", 1.0, false)}}}),
                 {{"float32", flops}});
  const auto candidate = profile_of(v, "candidate");
  ASSERT_TRUE(candidate && candidate->compute_roof && candidate->peak_tflops);
  EXPECT_NEAR(*candidate->compute_roof, (flops / 50e9) / 3.0, 1e-9);
  EXPECT_NEAR(*candidate->peak_tflops, 50.0, 1e-9);
  EXPECT_NEAR(*candidate->achieved_tflops, flops / 3e9, 1e-6);
  EXPECT_EQ(candidate->diagnosis, "compute-bound near the roof");
  EXPECT_NE(candidate->summary.find("does the reference's 137.44 GFLOP of arithmetic per call at "
                                    "45.8 TFLOP/s, 92% of the measured 50.0 TFLOP/s"),
            std::string::npos)
      << candidate->summary;
  // The reference, 4 times slower, is far from the compute roof and its memory roof.
  const auto reference = profile_of(v, "reference");
  ASSERT_TRUE(reference && reference->compute_roof);
  EXPECT_NEAR(*reference->compute_roof, (flops / 50e9) / 12.0, 1e-9);
  EXPECT_EQ(reference->diagnosis, "library-bound");
  EXPECT_NE(reference->summary.find("does 137.44 GFLOP"), std::string::npos) << reference->summary;
  // The report's "of roof" is the nearer roof.
  EXPECT_DOUBLE_EQ(*candidate->of_roof(), std::max(*candidate->roof, *candidate->compute_roof));
  // It survives a round trip through the store.
  const auto back = Profile::from_json(candidate->to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->compute_roof, candidate->compute_roof);
}

TEST(Profile, MixedPrecisionsAddTheirFloors) {
  // Half the arithmetic at the float32 roof, half at TF32's: 1 ms + 0.125 ms.
  const auto v = with_flops(gpu_verdict(2.25, 1e6, 3000, {{"busy_ms_median", 2.2}}),
                            {{"float32", 50e9}, {"tf32", 50e9}});
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p && p->compute_roof);
  EXPECT_NEAR(*p->compute_roof, 1.125 / 2.25, 1e-9);
  EXPECT_NEAR(*p->peak_tflops, 100e9 / 1.125e9, 1e-9);
}

TEST(Profile, LessArithmeticThanTheReferenceIsSaid) {
  // 10 GFLOP in 0.02 ms: 500 TFLOP/s against a 50 TFLOP/s roof, ten times over it.
  const auto v = with_flops(gpu_verdict(0.02, 1e6, 3000, {{"busy_ms_median", 0.019}}),
                            {{"float32", 1e12 * 0.02 / 1e3 * 500}});
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p && p->compute_roof);
  EXPECT_NEAR(*p->compute_roof, 10.0, 1e-9);
  EXPECT_EQ(p->diagnosis, "less arithmetic than the reference");
  EXPECT_NE(p->summary.find("10.0 times faster than the reference's arithmetic"), std::string::npos)
      << p->summary;
}

TEST(Profile, NoRoofForAPrecisionNeverMeasured) {
  // float64 has no measured throughput: the arithmetic is told, its roof is not.
  const auto v = with_flops(gpu_verdict(1.0, 1e6, 3000, {{"busy_ms_median", 0.9}}),
                            {{"float64", 1e9}, {"float32", 1e9}});
  const auto p = profile_of(v, "candidate");
  ASSERT_TRUE(p && p->flops);
  EXPECT_FALSE(p->compute_roof);
  EXPECT_NE(p->summary.find("2.00 GFLOP of arithmetic per call"), std::string::npos) << p->summary;
}

TEST(Profile, NothingTimedGivesNoProfile) {
  EXPECT_FALSE(profile_of({{"status", "incorrect"}, {"candidate_ms", nullptr}}, "candidate"));
  EXPECT_FALSE(profile_of(nlohmann::json::array(), "candidate"));
}

TEST(Profile, RoundTripsAndTheStoredOneWins) {
  auto v = gpu_verdict(0.215, 805e6, 4800, {{"top_kernels", {kernel("k", 1.0, true)}}});
  const auto made = profile_of(v, "candidate");
  ASSERT_TRUE(made);
  const auto back = Profile::from_json(made->to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), made->to_json());
  // A stored profile is read as it was stored, not made again from the measurements.
  nlohmann::json stored = made->to_json();
  stored["summary"] = "as stored";
  v["profile"] = {{"candidate", stored}};
  EXPECT_EQ(stored_profile(v, "candidate")->summary, "as stored");
  // Without one, it is made from the measurements (verdicts stored before profiles were kept).
  v.erase("profile");
  EXPECT_EQ(stored_profile(v, "candidate")->summary, made->summary);
}

TEST(Profile, DetailNames) {
  EXPECT_EQ(parse_profile_detail("none"), ProfileDetail::kNone);
  EXPECT_EQ(parse_profile_detail("summary"), ProfileDetail::kSummary);
  EXPECT_EQ(parse_profile_detail("full"), ProfileDetail::kFull);
  EXPECT_THROW(parse_profile_detail("all"), std::invalid_argument);
}

}  // namespace
}  // namespace cudal1
