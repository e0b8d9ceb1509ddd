#include "cudal1/eval/kernel_name.hpp"

#include <gtest/gtest.h>

namespace cudal1 {
namespace {

void expect_name(const std::string& traced, const std::string& readable,
                 const std::string& identifier) {
  const KernelName name = read_kernel_name(traced);
  EXPECT_EQ(name.readable, readable) << traced;
  EXPECT_EQ(name.identifier, identifier) << traced;
}

TEST(KernelName, PlainMangledTemplateAndNamespaced) {
  expect_name("_Z15rms_norm_kernelPKfS0_Pfllfb", "rms_norm_kernel", "rms_norm_kernel");
  expect_name("_Z12scale_kernelIfEvPKT_PS0_i", "scale_kernel<...>", "scale_kernel");
  expect_name("_ZN7cutlass7Kernel2I41cutlass_80_simt_sgemm_64x64_8x5_nn_align1EEvNT_6ParamsE",
              "cutlass::Kernel2<...>", "Kernel2");
  // extern "C" and library kernels with C names, Triton kernels: as they are.
  expect_name("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8",
              "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8",
              "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8");
  expect_name("triton_poi_fused_add_0", "triton_poi_fused_add_0", "triton_poi_fused_add_0");
}

TEST(KernelName, ALaunchingFunctionsNameInsideIsNotTheKernels) {
  // PyTorch's elementwise kernel instantiated for hardsigmoid: "hardsigmoid_kernel" appears in
  // the mangled name, but the kernel is vectorized_elementwise_kernel (a name the demangler
  // refuses is read from its leading nested name).
  expect_name(
      "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_18hardsigmoid_kernelERNS_"
      "18TensorIteratorBaseEENKUlvE_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
      "at::native::vectorized_elementwise_kernel<...>", "vectorized_elementwise_kernel");
  expect_name("_ZN2at6native13reduce_kernelILi512ELi1E_truncated", "at::native::reduce_kernel<...>",
              "reduce_kernel");
}

TEST(KernelName, AnonymousNamespacesAndReturnTypes) {
  // void (anonymous namespace)::fused<float>(float*)
  expect_name("_ZN12_GLOBAL__N_15fusedIfEEvPT_", "(anonymous namespace)::fused<...>", "fused");
}

}  // namespace
}  // namespace cudal1
