#include "cudal1/bench/baseline.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "cudal1/eval/devices.hpp"
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

TEST(DevicesTest, ResolvesTheDeviceOption) {
  using V = std::vector<std::string>;
  EXPECT_EQ(resolve_devices("cpu", true, 4), V{"cpu"});
  EXPECT_EQ(resolve_devices("auto", false, std::nullopt), V{"cpu"});
  EXPECT_EQ(resolve_devices("auto", true, 2), (V{"cuda:0", "cuda:1"}));
  EXPECT_EQ(resolve_devices("cuda", true, 3), (V{"cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_EQ(resolve_devices("cuda", true, std::nullopt), V{"cuda:0"});
  EXPECT_EQ(resolve_devices("cuda:1", true, 2), V{"cuda:1"});
  EXPECT_EQ(resolve_devices("cuda:1,cuda:0,cuda:1", true, 2), (V{"cuda:1", "cuda:0"}));
  EXPECT_CONTAINS(input_error([] { resolve_devices("cuda", false, 0); }), "sees no CUDA device");
  EXPECT_CONTAINS(input_error([] { resolve_devices("gpu", true, 1); }), "--device 'gpu'");
  EXPECT_CONTAINS(input_error([] { resolve_devices("cuda:2", true, 2); }), "only 2 GPUs");
}

TEST(DevicesTest, NewTasksGoToTheLeastBusyDevice) {
  const std::vector<std::string> gpus = {"cuda:0", "cuda:1", "cuda:2"};
  EXPECT_EQ(least_loaded(gpus, {}), "cuda:0");
  EXPECT_EQ(least_loaded(gpus, {"cuda:0"}), "cuda:1");
  EXPECT_EQ(least_loaded(gpus, {"cuda:0", "cuda:1", "cuda:0"}), "cuda:2");
  EXPECT_EQ(least_loaded(gpus, {"cuda:2", "cuda:1", "cuda:0", "cuda:1"}), "cuda:0");
  EXPECT_EQ(least_loaded({"cpu"}, {"cpu", "cpu"}), "cpu");
  // Spread over two GPUs, eight tasks submitted one after another land four on each.
  std::vector<std::string> busy;
  for (int i = 0; i < 8; ++i) busy.push_back(least_loaded({"cuda:0", "cuda:1"}, busy));
  EXPECT_EQ(std::count(busy.begin(), busy.end(), "cuda:1"), 4);
}

TEST(DevicesTest, CountsVisibleDevices) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string previous = saved ? saved : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "0,2,3", 1);
  EXPECT_EQ(visible_gpu_count(), 3);
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb", 1);
  EXPECT_EQ(visible_gpu_count(), 2);
  ::setenv("CUDA_VISIBLE_DEVICES", "1,-1,2", 1);
  EXPECT_EQ(visible_gpu_count(), 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(visible_gpu_count(), 0);
  if (saved) {
    ::setenv("CUDA_VISIBLE_DEVICES", previous.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace
}  // namespace cudal1::bench
