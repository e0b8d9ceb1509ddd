#include "cudal1/task/cuda_usage.hpp"

#include <gtest/gtest.h>

namespace cudal1 {
namespace {

SourceInfo candidate_with(std::vector<std::string> builds, std::vector<std::string> calls) {
  SourceInfo info;
  info.cuda_builds = std::move(builds);
  info.cuda_calls = std::move(calls);
  return info;
}

TEST(CudaUsage, CudaBuildOnTheCpuSaysWhatAndWhatToDo) {
  const auto info = candidate_with({"load_inline with cuda_sources on line 12"}, {});
  const auto why = cuda_build_on_cpu(info, "cpu", false);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("builds CUDA code (load_inline with cuda_sources on line 12)"),
            std::string::npos);
  EXPECT_NE(why->find("the device is the CPU"), std::string::npos);
  EXPECT_NE(why->find("--device cuda on a machine with a GPU"), std::string::npos);
  EXPECT_EQ(why->find("--device auto"), std::string::npos);
  EXPECT_NE(cuda_build_on_cpu(info, "cpu", true)->find("--device auto"), std::string::npos);
}

TEST(CudaUsage, NothingToSayOnAGpuOrWithoutCuda) {
  EXPECT_FALSE(
      cuda_build_on_cpu(candidate_with({"the Triton kernel k on line 3"}, {}), "cuda:0", false));
  EXPECT_FALSE(cuda_build_on_cpu(candidate_with({}, {".cuda() on line 9"}), "cpu", false));
  EXPECT_EQ(cuda_call_hint(candidate_with({}, {".cuda() on line 9"}), "cuda:0"), "");
  EXPECT_EQ(cuda_call_hint(candidate_with({}, {}), "cpu"), "");
}

TEST(CudaUsage, CallHintNamesTheFirstPlaces) {
  const auto hint = cuda_call_hint(
      candidate_with({}, {".cuda() on line 9", "the device 'cuda' on line 10",
                          "torch.cuda.synchronize() on line 11", ".cuda() on line 20"}),
      "cpu");
  EXPECT_NE(hint.find(".cuda() on line 9, the device 'cuda' on line 10, "
                      "torch.cuda.synchronize() on line 11 and 1 more"),
            std::string::npos);
  EXPECT_NE(hint.find("--device cuda"), std::string::npos);
  // A candidate refused for its CUDA build already has its reason.
  EXPECT_EQ(
      cuda_call_hint(candidate_with({"CUDAExtension on line 2"}, {".cuda() on line 9"}), "cpu"),
      "");
}

}  // namespace
}  // namespace cudal1
