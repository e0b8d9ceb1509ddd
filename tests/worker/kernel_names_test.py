#!/usr/bin/env python3
"""The candidate's own kernels: the source reader (every declaration form) and the symbol scan
of a library it built (nvcc's launch stubs), without running anything.

    kernel_names_test.py [--nvcc /usr/local/cuda/bin/nvcc]

The library part compiles a small .cu with nvcc and is skipped where there is none.
"""

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "worker", "python"))

import cudal1_host  # noqa: E402
import source_scan  # noqa: E402

NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


class SourceReader(unittest.TestCase):
    def names(self, text):
        return source_scan.kernel_names_in_cuda(text)

    def test_attributes_are_not_names(self):
        # The forms that made the reader take the attribute for the kernel's name.
        self.assertEqual(self.names("template <bool B>\n__global__ void __launch_bounds__(256) "
                                    "ln_normalize_kernel(const float* a) {}"), {"ln_normalize_kernel"})
        self.assertEqual(self.names("__global__ void __cluster_dims__(2, 1, 1) cluster_kernel(float* x) {}"),
                         {"cluster_kernel"})
        self.assertEqual(self.names("__global__ __launch_bounds__(256, 2) void colsum_kernel(float* x) {}"),
                         {"colsum_kernel"})
        self.assertEqual(self.names("template <typename T, int N>\n__global__ void __launch_bounds__(N) "
                                    "__maxnreg__(64) tk(T* __restrict__ x) {}"), {"tk"})
        self.assertEqual(self.names("__global__ void __launch_bounds__(MAX(256, 128)) nested(float* x) {}"),
                         {"nested"})

    def test_qualifiers_specialisations_and_line_breaks(self):
        self.assertEqual(self.names('extern "C" __global__ void add(float* x) {}\n'
                                    "__global__ static void b2(int n) {}"), {"add", "b2"})
        self.assertEqual(self.names("__global__ void foo<float>(float*);"), {"foo"})
        self.assertEqual(self.names("__global__ void\nsplit_decl(\n float* x) {}"), {"split_decl"})
        self.assertEqual(self.names("float* p; // no kernels"), set())

    def test_macros_that_define_kernels(self):
        self.assertEqual(self.names("#define DEFINE_KERNEL(NAME) __global__ void NAME##_kernel(float* x) { }\n"
                                    "DEFINE_KERNEL(relu)\nDEFINE_KERNEL(gelu)"), {"relu_kernel", "gelu_kernel"})
        self.assertEqual(self.names("#define K(T, NAME) \\\n  __global__ void NAME(T* x) { }\n"
                                    "K(float, scale_f)\nK(double, scale_d)"), {"scale_f", "scale_d"})

    def test_every_string_of_a_file_and_triton(self):
        tree = ast.parse('import triton\n@triton.jit\ndef tri(x):\n    pass\n'
                         'cuda = """__global__ void __launch_bounds__(128) a_kernel(float* x) {}"""\n'
                         'sources = ["__global__ void b_kernel(int* y) {}",\n'
                         '           "__global__ __cluster_dims__(2,1,1) void c_kernel() {}"]\n')
        self.assertEqual(source_scan.own_kernel_names(tree), ["a_kernel", "b_kernel", "c_kernel", "tri"])

    def test_the_red_team_cases(self):
        def of(name):
            with open(os.path.join(ROOT, "tests", "redteam", "legit", name + ".py")) as f:
                return source_scan.own_kernel_names(ast.parse(f.read()))
        self.assertEqual(of("launch_bounds_template"), ["affine_kernel", "unused_tail_kernel"])
        # Its name is put together at run time: only the built library tells it.
        self.assertEqual(of("kernel_name_at_run_time"), [])


class MangledNames(unittest.TestCase):
    def test_identifiers(self):
        self.assertEqual(cudal1_host._mangled_identifier("Z19ln_normalize_kernelILb1EEvPKfPf"), "ln_normalize_kernel")
        self.assertEqual(cudal1_host._mangled_identifier("ZN3foo5innerEPi"), "inner")
        self.assertEqual(cudal1_host._mangled_identifier("plain_c"), "plain_c")


@unittest.skipUnless(os.path.exists(NVCC), "no nvcc")
class BuiltLibrary(unittest.TestCase):
    def test_every_kernel_of_a_built_library(self):
        source = r'''
#define DEFINE_KERNEL(NAME) __global__ void NAME##_kernel(float* x) { x[threadIdx.x] *= 2; }
DEFINE_KERNEL(relu)
template <bool B>
__global__ void __launch_bounds__(256) ln_normalize_kernel(const float* a, float* b) { b[0] = B ? a[0] : 0; }
namespace foo { __global__ void inner(int* p) { p[0] = 1; } }
extern "C" __global__ void plain_c(float* x) { x[0] = 0; }
void launch(float* x, const float* a, float* b, int* p) {
  relu_kernel<<<1, 32>>>(x);
  ln_normalize_kernel<true><<<1, 32>>>(a, b);
  foo::inner<<<1, 1>>>(p);
  plain_c<<<1, 1>>>(x);
}
'''
        with tempfile.TemporaryDirectory() as work:
            cu, so = os.path.join(work, "k.cu"), os.path.join(work, "libk.so")
            with open(cu, "w") as f:
                f.write(source)
            subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", cu, "-o", so], check=True,
                           capture_output=True, timeout=600)
            self.assertEqual(cudal1_host.kernel_names_in_library(so),
                             {"relu_kernel", "ln_normalize_kernel", "inner", "plain_c"})

    def test_not_a_library(self):
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(b"not an ELF file")
            f.flush()
            self.assertEqual(cudal1_host.kernel_names_in_library(f.name), set())


if __name__ == "__main__":
    unittest.main()
