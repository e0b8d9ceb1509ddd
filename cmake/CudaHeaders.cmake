# CUDA support is optional at build time and resolved at run time: the worker loads libcuda and
# CUPTI with dlopen (and the orchestrator NVML), so only the headers are needed here. Without
# them the build is CPU-only (`--device cpu`). -DCUDAL1_CUDA_INCLUDE_DIR=... picks a directory.
find_path(CUDAL1_CUDA_INCLUDE_DIR cuda.h
          HINTS $ENV{CUDA_HOME}/include /usr/local/cuda/include
                /usr/local/cuda/targets/x86_64-linux/include
          DOC "Directory holding cuda.h and cupti.h")
if(CUDAL1_CUDA_INCLUDE_DIR AND EXISTS ${CUDAL1_CUDA_INCLUDE_DIR}/cupti.h)
  set(CUDAL1_HAVE_CUDA ON)
  message(STATUS "cudal1: CUDA headers in ${CUDAL1_CUDA_INCLUDE_DIR}: GPU timing enabled")
else()
  set(CUDAL1_HAVE_CUDA OFF)
  message(STATUS "cudal1: no CUDA headers (cuda.h + cupti.h) found: CPU-only build")
endif()
