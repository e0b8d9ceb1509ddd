// Code similarity: what counts (tokens, structure, suspicious APIs), what does not (comments,
// strings, layout), and the ranking the reviewer relies on.
#include <gtest/gtest.h>

#include <regex>
#include <utility>
#include <vector>

#include "cudal1/common/text_file.hpp"
#include "cudal1/review/code_fingerprint.hpp"
#include "cudal1/review/hack_corpus.hpp"

namespace {

namespace fs = std::filesystem;
using cudal1::read_file;
using cudal1::review::CodeFingerprint;
using cudal1::review::compare;
using cudal1::review::HackCorpus;

const fs::path kData = CUDAL1_TEST_DATA;
const fs::path kRoot = CUDAL1_SOURCE_ROOT;

bool has_feature(const std::string& source, const std::string& feature) {
  return CodeFingerprint::of(source).api_features().count(feature) > 0;
}

// The same program reworded: comments added and changed, blank lines, a local renamed, a
// statement split over lines. What a model copying a known hack would produce.
std::string reword(const std::string& source) {
  std::string out = "# A candidate that is faster.\n\n" + source + "\n\n# end of file\n";
  out = std::regex_replace(out, std::regex(R"(\bself\.scale\b)"), "self.factor");
  out = std::regex_replace(out, std::regex(R"(\bforward\(self, x\))"), "forward(self, inp)");
  out = std::regex_replace(out, std::regex(R"(\bx\b)"), "inp");
  out = std::regex_replace(out, std::regex(R"(\n#[^\n]*)"), "\n# reworded comment");
  return out;
}

TEST(CodeFingerprint, CommentsStringsAndLayoutDoNotCount) {
  const std::string a = R"(
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """Fast."""
    def forward(self, x, y):
        return torch.relu(x + y)  # fused
)";
  const std::string b = R"(import torch
import torch.nn as nn
# a comment that mentions threading and torch.cuda.Stream
class ModelNew(nn.Module):
    '''A different docstring that says data_ptr.'''

    def forward(self,
                x,
                y):
        return torch.relu(
            x + y)
)";
  const auto s = compare(CodeFingerprint::of(a), CodeFingerprint::of(b));
  EXPECT_DOUBLE_EQ(s.code, 1.0);
  EXPECT_DOUBLE_EQ(s.score, 1.0);
  EXPECT_TRUE(CodeFingerprint::of(b).api_features().empty());
}

TEST(CodeFingerprint, ImportAliasesResolveToTheirModules) {
  EXPECT_TRUE(has_feature("from threading import Thread as T\nT(target=f).start()\n", "threads"));
  EXPECT_TRUE(
      has_feature("import concurrent.futures as cf\npool = cf.ThreadPoolExecutor()\n", "threads"));
  EXPECT_TRUE(
      has_feature("from torch import cuda\nwith cuda.stream(s):\n    pass\n", "side_streams"));
  EXPECT_TRUE(has_feature("import gc as g\nobjs = g.get_objects()\n", "introspection"));
  EXPECT_FALSE(has_feature("import torch\nx = torch.relu(y)\n", "threads"));
}

TEST(CodeFingerprint, DetectsTheSuspiciousApis) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"key = x.data_ptr()", "data_ptr"},
      {"key = id(x)", "object_identity"},
      {"def f():\n    global _last\n", "caching"},
      {"self._cache = {}", "caching"},
      {"import torch\nsetattr(torch, 'relu', fast_relu)", "monkey_patch"},
      {"import torch\ntorch.cuda.synchronize = lambda: None", "monkey_patch"},
      {"import torch\nclass Lazy(torch.Tensor):\n    pass\n", "tensor_subclass"},
      {"def __torch_function__(cls, func, types, args=(), kwargs=None): pass", "tensor_subclass"},
      {"y.__class__ = Lazy", "tensor_subclass"},
      {"import torch\ny = torch.empty_like(x)", "uninitialized_alloc"},
      {"f = open('/dev/shm/out', 'wb')", "filesystem"},
      {"path = '/dev/shm/cudal1'", "filesystem"},
      {"import torch\ntorch.set_flush_denormal(True)", "denormal_flush"},
      {"import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "tf32"},
      {"import torch\nwith torch.autocast('cuda'):\n    pass\n", "autocast"},
      {"y = x.half()", "half_precision"},
      {"x.add_(1.0)", "inplace_ops"},
      {"import torch\ntorch.add(a, b, out=c)", "inplace_ops"},
      {"def get_inputs():\n    return []\n", "task_redefinition"},
      {"inputs = get_inputs()", "task_access"},
      {"import torch\ntorch.manual_seed(0)", "rng_control"},
      {"src = '''void f(cudaStreamAttrValue a) { a.accessPolicyWindow.hitRatio = 1.0f; }'''",
       "l2_persistence"},
      {"import ctypes\nlib = ctypes.CDLL('libcuda.so')", "native_access"},
      {"import time\ntime.sleep(0.01)", "process_hooks"},
      {"src = '''#include <thread>\nvoid f() { std::thread t(g); t.detach(); }'''", "threads"},
      {"src = '''__global__ void k(__half* x) { x[0] = __float2half(1.f); }'''", "half_precision"},
      {"src = '''void f() { cudaStream_t s; cudaStreamCreate(&s); }'''", "side_streams"},
      {"import torch\nx = torch.zeros_like(y)", "constant_output"},
  };
  for (const auto& [source, feature] : cases) {
    EXPECT_TRUE(has_feature(source, feature)) << feature << " in:\n" << source;
  }
}

TEST(CodeFingerprint, CommonCodeRaisesNoFeature) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"import torch\ntorch.cuda.empty_cache()", "caching"},
      {"# x.data_ptr() in a comment", "data_ptr"},
      {"doc = 'we do not use threading here'", "threads"},
      {"y = torch.relu(x)", "inplace_ops"},
      {"src = '''// std::thread in a C++ comment\nint f() { return 1; }'''", "threads"},
      {"class ModelNew(nn.Module):\n    pass\n", "task_redefinition"},
      {"y = x.float()", "half_precision"},
  };
  for (const auto& [source, feature] : cases) {
    EXPECT_FALSE(has_feature(source, feature)) << feature << " in:\n" << source;
  }
}

TEST(CodeFingerprint, EmbeddedCudaCountsWithoutItsComments) {
  const std::string kernel = R"(
from torch.utils.cpp_extension import load_inline
src = """
#include <torch/extension.h>
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // one element per thread
    if (i < n) y[i] = 2.0f * x[i];
}
"""
)";
  std::string commented = kernel;
  commented.replace(commented.find("// one element per thread"), 25, "/* a different note */");
  EXPECT_DOUBLE_EQ(compare(CodeFingerprint::of(kernel), CodeFingerprint::of(commented)).code, 1.0);
  std::string other = kernel;
  other.replace(other.find("y[i] = 2.0f * x[i];"), 19, "y[i] = x[i] > 0 ? x[i] : 0.0f;");
  EXPECT_LT(compare(CodeFingerprint::of(kernel), CodeFingerprint::of(other)).code, 0.95);
}

TEST(CodeFingerprint, ScoresAreSymmetricAndBetweenZeroAndOne) {
  const HackCorpus corpus = HackCorpus::load(kData / "hacks");
  for (const auto& a : corpus.cases()) {
    for (const auto& b : corpus.cases()) {
      const double ab = compare(a.fingerprint, b.fingerprint).score;
      const double ba = compare(b.fingerprint, a.fingerprint).score;
      EXPECT_DOUBLE_EQ(ab, ba);
      EXPECT_GE(ab, 0.0);
      EXPECT_LE(ab, 1.0);
    }
  }
  EXPECT_DOUBLE_EQ(compare(CodeFingerprint::of(""), CodeFingerprint::of("")).score, 0.0);
}

TEST(HackCorpusSimilarity, EveryCaseRanksItsRewordedCopyFirst) {
  const HackCorpus corpus = HackCorpus::load(kData / "hacks");
  ASSERT_GE(corpus.cases().size(), 10u);
  for (const auto& c : corpus.cases()) {
    const auto ranked = corpus.most_similar(reword(c.source), 3);
    ASSERT_EQ(ranked.size(), 3u);
    EXPECT_EQ(ranked[0].hack_case->name, c.name) << "reworded:\n" << reword(c.source);
    EXPECT_GT(ranked[0].similarity.score, 0.6) << c.name;
    EXPECT_GT(ranked[0].similarity.score, ranked[1].similarity.score + 0.1) << c.name;
  }
}

TEST(HackCorpusSimilarity, TheReviewTestCandidateFindsItsCase) {
  const HackCorpus corpus = HackCorpus::load(kData / "hacks");
  const auto ranked = corpus.most_similar(read_file(kData / "candidates/flush_denormals.py"), 1);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].hack_case->name, "flush_denormals");
}

TEST(HackCorpusSimilarity, UnrelatedLegitimateCodeScoresLow) {
  const HackCorpus corpus = HackCorpus::load(kData / "hacks");
  int files = 0;
  for (const auto& dir : fs::directory_iterator(kRoot / "examples")) {
    for (const char* name : {"fast.py", "fast_torch.py", "fast_cpp.py"}) {
      const fs::path file = dir.path() / name;
      if (!fs::exists(file)) continue;
      ++files;
      const auto ranked = corpus.most_similar(read_file(file), 1);
      ASSERT_EQ(ranked.size(), 1u);
      EXPECT_LT(ranked[0].similarity.score, 0.3)
          << file << " is close to " << ranked[0].hack_case->name;
    }
  }
  EXPECT_GE(files, 5);
}

}  // namespace
