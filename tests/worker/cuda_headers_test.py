#!/usr/bin/env python3
"""A load_inline build's CUDA sources with a lighter torch/extension.h (extension_builds.py's
_lighten_cuda_headers), on the host module as the worker has it (its parts joined in the order of
src/worker/CMakeLists.txt) and a stand-in for PyTorch's load_inline that records what it was given:

- the include line is replaced in place (the same lines, the same line numbers), in a string or a
  list of sources, quoted or bracketed; other lines, and sources without it, are left alone;
- a build that succeeds with the light header is reported as such;
- one whose cuda.cu fails to compile is built again with its sources as written, under the same
  version of its name, and its build folder records that: a later process goes straight to the
  sources as written;
- one that fails elsewhere (main.cpp's binding, the link) fails as it is, with no second build;
- without CUDAL1_CUDA_HEADERS=light (unset, or full) load_inline is left alone.

    cuda_headers_test.py REPO_ROOT
"""

import os
import sys
import tempfile
import types
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import host_module_test  # noqa: E402  (the parts of cudal1_host, in the build's order)


def host_module():
    """cudal1_host as the worker compiles it in: its parts joined, in the build's order."""
    texts = []
    for path in host_module_test.parts(ROOT):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    module = types.ModuleType("cudal1_host_under_test")
    exec(compile("\n".join(texts), "cudal1_host", "exec"), module.__dict__)
    return module


SOURCE = "#include <torch/extension.h>\n__global__ void k() {}\ntorch::Tensor f(torch::Tensor x);\n"
LIGHT = "#include <torch/csrc/utils/pybind.h>\n__global__ void k() {}\ntorch::Tensor f(torch::Tensor x);\n"
# cuda.cu's object failed (ninja's FAILED line, as ninja before and since 1.12 writes it).
CUDA_FAILURES = [
    "Error building extension 'ext': [1/3] nvcc ... -c /x/ext/cuda.cu -o cuda.cuda.o\nFAILED: cuda.cuda.o\n"
    "/x/ext/cuda.cu(9): error: namespace \"torch\" has no member \"nn\"\n1 error detected",
    "Error building extension 'ext': [2/3] nvcc ...\nFAILED: [code=1] cuda.cuda.o\n"
    "/x/ext/cuda.cu(3): error: expected a \";\"\n"]
# Failures the header does not decide: main.cpp's binding of a function no declaration names
# (cuda.cu compiled, with a warning), the link.
OWN_ERRORS = [
    "Error building extension 'ext': [1/3] c++ ... main.cpp\nFAILED: main.o\n/x/ext/main.cpp:7:42: error: "
    "'forward' was not declared in this scope\n[2/3] nvcc ...\n/x/ext/cuda.cu(20): warning #177-D: variable "
    "\"n\" was declared but never referenced\n",
    "Error building extension 'ext': [3/3] c++ cuda.cuda.o main.o -shared -o ext.so\nFAILED: ext.so\n"
    "multiple definition of `PyInit_ext'; cuda.cuda.o: first defined here\n"
    "collect2: error: ld returned 1 exit status\n"]


class Builder:
    """Stands in for cpp_extension.load_inline: records the CUDA sources of each call and fails
    as told when they hold a given text."""

    def __init__(self):
        self.calls = []
        self.fail_on, self.message = None, ""

    def load_inline(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                    build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                    with_pytorch_error_handling=True, keep_intermediates=True):
        self.calls.append(cuda_sources)
        text = "".join(cuda_sources) if isinstance(cuda_sources, list) else (cuda_sources or "")
        if self.fail_on is not None and self.fail_on in text:
            raise RuntimeError(self.message)
        return "module " + name


class LightCudaHeaders(unittest.TestCase):
    def setUp(self):
        from torch.utils import cpp_extension

        self.cpp_extension = cpp_extension
        self.saved = cpp_extension.load_inline
        self.builder = Builder()
        cpp_extension.load_inline = self.builder.load_inline
        self.folder = tempfile.TemporaryDirectory(prefix="cudal1-cuda-headers-")
        os.environ["TORCH_EXTENSIONS_DIR"] = self.folder.name
        os.environ["CUDAL1_CUDA_HEADERS"] = "light"
        self.host = host_module()
        self.host._lighten_cuda_headers()

    def tearDown(self):
        self.cpp_extension.load_inline = self.saved
        self.folder.cleanup()
        os.environ.pop("CUDAL1_CUDA_HEADERS", None)

    def test_the_include_line_is_replaced_in_place(self):
        light, changed = self.host._lighter_cuda_sources(SOURCE)
        self.assertTrue(changed)
        self.assertEqual(light, LIGHT)
        quoted, changed = self.host._lighter_cuda_sources(['  #  include "torch/extension.h"\nint a;', "int b;"])
        self.assertTrue(changed)
        self.assertEqual(quoted, ["  #  include <torch/csrc/utils/pybind.h>\nint a;", "int b;"])
        for unchanged in ("#include <cuda_runtime.h>\n", "// #include <torch/extension.h>\n", None, ""):
            self.assertEqual(self.host._lighter_cuda_sources(unchanged), (unchanged, False))

    def test_a_light_build_that_succeeds_is_reported(self):
        module = self.cpp_extension.load_inline("ext", "", cuda_sources=SOURCE, functions=["f"])
        self.assertEqual(module, "module ext")
        self.assertEqual(self.builder.calls, [LIGHT])
        self.assertEqual(self.host.cuda_header_builds(), {"light": ["ext"]})

    def test_which_failures_build_the_sources_as_written(self):
        for message in CUDA_FAILURES:
            self.assertTrue(self.host._needs_full_header(message), message)
        for message in OWN_ERRORS + ["Killed signal terminated program cc1plus"]:
            self.assertFalse(self.host._needs_full_header(message), message)

    def test_a_cuda_source_that_fails_is_built_as_written_and_recorded(self):
        self.builder.fail_on, self.builder.message = "pybind.h", CUDA_FAILURES[0]
        self.cpp_extension.JIT_EXTENSION_VERSIONER.entries["ext"] = "the light build's version"
        module = self.cpp_extension.load_inline("ext", "", cuda_sources=SOURCE, functions=["f"])
        self.assertEqual(module, "module ext")
        self.assertEqual(self.builder.calls, [LIGHT, SOURCE])
        self.assertNotIn("ext", self.cpp_extension.JIT_EXTENSION_VERSIONER.entries)
        self.assertEqual(self.host.cuda_header_builds(), {"full": ["ext"]})
        records = os.listdir(os.path.join(self.folder.name, "cudal1-full-headers"))
        self.assertEqual(len(records), 1)
        # A later process (a worker loading the build) goes straight to the sources as written.
        later = host_module()
        self.cpp_extension.load_inline = self.builder.load_inline
        later._lighten_cuda_headers()
        self.builder.calls.clear()
        self.cpp_extension.load_inline("ext", "", cuda_sources=SOURCE, functions=["f"])
        self.assertEqual(self.builder.calls, [SOURCE])
        self.assertEqual(later.cuda_header_builds(), {"full": ["ext"]})

    def test_other_failures_are_the_candidates_own(self):
        self.builder.fail_on, self.builder.message = "__global__", OWN_ERRORS[0]
        with self.assertRaises(RuntimeError) as raised:
            self.cpp_extension.load_inline("ext", "", cuda_sources=SOURCE, functions=["f"])
        self.assertIn("'forward' was not declared", str(raised.exception))
        self.assertEqual(self.builder.calls, [LIGHT])
        self.assertFalse(os.path.exists(os.path.join(self.folder.name, "cudal1-full-headers")))

    def test_sources_without_the_header_are_built_as_written(self):
        self.cpp_extension.load_inline("ext", "", cuda_sources="__global__ void k() {}\n")
        self.assertEqual(self.builder.calls, ["__global__ void k() {}\n"])
        self.assertEqual(self.host.cuda_header_builds(), {})

    def test_the_default_and_full_leave_load_inline_alone(self):
        for value in (None, "full"):
            self.cpp_extension.load_inline = self.builder.load_inline
            os.environ.pop("CUDAL1_CUDA_HEADERS", None)
            if value:
                os.environ["CUDAL1_CUDA_HEADERS"] = value
            host_module()._lighten_cuda_headers()
            self.assertEqual(self.cpp_extension.load_inline, self.builder.load_inline)  # not wrapped


if __name__ == "__main__":
    unittest.main()
