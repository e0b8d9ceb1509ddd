// A traced kernel's name (as CUPTI reports it: mangled for C++ kernels, plain for extern "C" and
// Triton ones) as a person reads it and as a candidate's source declares it.
#pragma once

#include <string>

namespace cudal1 {

struct KernelName {
  // Qualified, template arguments and parameters left out: "at::native::reduce_kernel<...>".
  std::string readable;
  // The function's own identifier: "reduce_kernel". A candidate's kernel is its own when this
  // equals a name it declares or built; a substring of the whole name is not enough (PyTorch's
  // kernels carry the names of the functions that launch them, e.g. "hardsigmoid_kernel").
  std::string identifier;
};

KernelName read_kernel_name(const std::string& traced);

}  // namespace cudal1
