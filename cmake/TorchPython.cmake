# Finds the Python interpreter that hosts PyTorch (the worker embeds it) and pybind11.
# Pass -DPython3_EXECUTABLE=/path/to/python3 to choose; otherwise the first python3 that imports
# torch among PATH and /usr/bin/python3 is used.
if(NOT Python3_EXECUTABLE)
  find_program(_cudal1_path_python python3)
  foreach(_candidate ${_cudal1_path_python} /usr/bin/python3)
    execute_process(COMMAND ${_candidate} -c "import torch" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(Python3_EXECUTABLE ${_candidate} CACHE FILEPATH "Python interpreter with PyTorch")
      break()
    endif()
  endforeach()
endif()
if(NOT Python3_EXECUTABLE)
  message(FATAL_ERROR "No python3 that can 'import torch' was found. Install python3-torch "
                      "(Debian) or pass -DPython3_EXECUTABLE=/path/to/python3.")
endif()

execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import json, sys, torch; print(json.dumps({'path': [p for p in sys.path if p], 'torch': torch.__version__}))"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE CUDAL1_PYTHON_INFO OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${Python3_EXECUTABLE} cannot import torch: ${_err}")
endif()
message(STATUS "cudal1: PyTorch host interpreter ${Python3_EXECUTABLE}: ${CUDAL1_PYTHON_INFO}")

find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Embed)

# pybind11: a pip installation in the torch interpreter (GPU images) or Debian's pybind11-dev.
if(NOT pybind11_DIR)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(_rc EQUAL 0)
    set(pybind11_DIR ${_pybind11_dir})
  endif()
endif()
set(PYBIND11_FINDPYTHON ON)
find_package(pybind11 CONFIG REQUIRED)

# The directories a sandboxed worker must see read-only besides the system's (/usr, /lib*, ...):
# the interpreter's prefixes, every sys.path entry, PyTorch and the CUDA toolkit PyTorch builds
# with. Fixed for this build, since the worker embeds this interpreter.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c [=[
import json, os, sys, sysconfig
found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
         os.path.dirname(os.path.abspath(sys.executable)),
         os.path.dirname(os.path.realpath(sys.executable)),
         sysconfig.get_config_var("LIBDIR") or ""]
found += [p for p in sys.path if p]
try:
    import torch
    found.append(os.path.dirname(os.path.dirname(torch.__file__)))
    from torch.utils import cpp_extension
    found.append(cpp_extension.CUDA_HOME or "")
    found += cpp_extension.include_paths() + cpp_extension.library_paths()
except Exception:
    pass
roots = sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)} |
               {os.path.abspath(p) for p in found if p and os.path.isdir(p)})
print(json.dumps(roots))
]=]
  RESULT_VARIABLE _rc OUTPUT_VARIABLE CUDAL1_PYTHON_ROOTS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _rc EQUAL 0)
  set(CUDAL1_PYTHON_ROOTS "[]")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/python_roots.hpp.in
               ${CMAKE_BINARY_DIR}/generated/cudal1/python_roots.hpp @ONLY)
