// A candidate that needs CUDA, evaluated on the CPU. PyTorch's extension builder fails there deep
// inside (an IndexError on the empty list of GPU architectures) and a .cuda() call with "Torch not
// compiled with CUDA enabled"; neither says what to do. These say it plainly.
#pragma once

#include <optional>
#include <string>

#include "cudal1/task/source_check.hpp"

namespace cudal1 {

// Why a candidate that builds CUDA code (nvcc through torch.utils.cpp_extension, Triton kernels)
// cannot be evaluated on `device`; nullopt when it builds none or the device is a GPU.
// `device_was_auto`: the CPU was chosen by --device auto because PyTorch sees no GPU.
std::optional<std::string> cuda_build_on_cpu(const SourceInfo& candidate, const std::string& device,
                                             bool device_was_auto);

// For a candidate that failed on the CPU: what in it puts work on a CUDA device and what to do,
// as a sentence to append to the verdict's error; empty when nothing does or the device is a GPU.
std::string cuda_call_hint(const SourceInfo& candidate, const std::string& device);

}  // namespace cudal1
