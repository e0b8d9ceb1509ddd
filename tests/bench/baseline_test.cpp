#include "cudal1/bench/baseline.hpp"

#include <gtest/gtest.h>

#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using testing::input_error;

TEST(BaselineTest, EagerIsAlwaysFirst) {
  EXPECT_EQ(parse_baselines("eager"), (std::vector<std::string>{"eager"}));
  EXPECT_EQ(parse_baselines(""), (std::vector<std::string>{"eager"}));
  EXPECT_EQ(parse_baselines("cuda-graph, compile,eager,compile"),
            (std::vector<std::string>{"eager", "cuda-graph", "compile"}));
  const std::string message = input_error([] { parse_baselines("eager,inductor"); });
  EXPECT_CONTAINS(message, "unknown baseline 'inductor'");
  EXPECT_CONTAINS(message, "compile-max-autotune");
}

TEST(BaselineTest, AvailabilityDependsOnPyTorchAndDevice) {
  EXPECT_EQ(baseline_unavailable("compile", "1.13.0a0", true).value_or(""),
            "torch.compile needs PyTorch >= 2.0 (found 1.13.0a0)");
  EXPECT_TRUE(baseline_unavailable("compile-max-autotune", "1.13.1", false));
  EXPECT_FALSE(baseline_unavailable("compile", "2.5.1+cu124", false));
  EXPECT_FALSE(baseline_unavailable("compile-reduce-overhead", "2.1.0", true));
  EXPECT_CONTAINS(baseline_unavailable("cuda-graph", "2.5.1", true).value_or(""), "CUDA device");
  EXPECT_FALSE(baseline_unavailable("cuda-graph", "2.5.1", false));
  EXPECT_TRUE(baseline_unavailable("cuda-graph", "1.9.0", false));
  EXPECT_FALSE(baseline_unavailable("eager", "1.13.0", true));
}

TEST(BaselineTest, GeneratedTaskWrapsTheOriginal) {
  const std::string compiled = baseline_task_source(
      "compile-max-autotune", "/suite/level1/3_Gelu \"x\".py", "import torch\nN = \"\u00e9\"\n");
  EXPECT_CONTAINS(compiled, "_TASK_FILE = \"/suite/level1/3_Gelu \\\"x\\\".py\"");
  // The task travels inside the file: it is evaluated the same where the suite is not.
  EXPECT_CONTAINS(compiled, "_TASK_SOURCE = \"import torch\\nN = \\\"\u00e9\\\"\\n\"");
  EXPECT_CONTAINS(compiled, "exec(compile(_TASK_SOURCE, _TASK_FILE, \"exec\"), _task.__dict__)");
  EXPECT_CONTAINS(compiled, "_MODE = \"max-autotune\"");
  EXPECT_CONTAINS(compiled, "class Model(nn.Module)");
  EXPECT_CONTAINS(compiled, "def get_inputs():");
  EXPECT_CONTAINS(compiled, "def get_init_inputs():");
  EXPECT_CONTAINS(compiled, "torch.compile(self.eager, mode=_MODE)");
  const std::string graph = baseline_task_source("cuda-graph", "/t.py", "x = 1\n");
  EXPECT_CONTAINS(graph, "torch.cuda.CUDAGraph()");
  EXPECT_CONTAINS(graph, "graph.replay()");
  EXPECT_THROW(baseline_task_source("eager", "/t.py", ""), std::invalid_argument);
}

}  // namespace
}  // namespace cudal1::bench
