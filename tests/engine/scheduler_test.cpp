// The evaluation engine through its C++ API: many evaluations in flight, one device phase at a
// time. Runs real workers (PyTorch on the CPU); the paths come from the build
// (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "cudal1/common/error.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "engine_test_support.hpp"

namespace cudal1 {
namespace {

using engine_test::data;
using engine_test::request_for;
using engine_test::test_engine;

TEST(LocalEvaluator, ConcurrentEvaluationsNeverShareTheDevice) {
  EngineConfig config = test_engine();
  config.lock_dir =
      make_private_directory(std::filesystem::temp_directory_path(), "cudal1-sched-locks-");
  LocalEvaluator evaluator(config);
  std::vector<std::future<Verdict>> futures;
  for (const char* candidate : {"fast.py", "fast.py", "overrides_task.py", "wrong.py"}) {
    futures.push_back(evaluator.submit(request_for(candidate)));
  }
  std::vector<std::pair<double, double>> windows, trials;
  for (auto& f : futures) {
    const Verdict v = f.get();
    ASSERT_TRUE(v.status == Status::kOk || v.status == Status::kIncorrect) << v.summary_line();
    const auto& phases = v.details.at("phases");
    // One shared hold for the first calls, one per trial and, for a correct candidate, one for
    // the timing inputs and one per request of the warm-up (both before the timing phase).
    const auto& shared = phases.at("device_shared");
    const std::size_t warm_up =
        v.status == Status::kOk ? phases.at("prewarm").at("requests").get<std::size_t>() : 0;
    if (v.status == Status::kOk) {
      EXPECT_GE(warm_up, 1u);
    }
    EXPECT_EQ(shared.size(),
              1 + v.details.at("trials").size() + (v.status == Status::kOk ? 1 + warm_up : 0))
        << shared.dump();
    for (const auto& span : shared)
      trials.emplace_back(span[0].get<double>(), span[1].get<double>());
    if (v.status != Status::kOk) continue;  // not timed: never held the device alone
    const auto& held = phases.at("device_held");
    windows.emplace_back(held[0].get<double>(), held[1].get<double>());
  }
  ASSERT_GE(windows.size(), 2u);
  // Correctness trials share the device with each other, never with a timing phase.
  for (const auto& [from, to] : trials) {
    for (const auto& [held_from, held_to] : windows) {
      EXPECT_TRUE(to <= held_from || held_to <= from)
          << "trials [" << from << ", " << to << "] overlap a timing phase [" << held_from << ", "
          << held_to << "]";
    }
  }
  std::sort(windows.begin(), windows.end());
  for (std::size_t i = 1; i < windows.size(); ++i) {
    EXPECT_LE(windows[i - 1].second, windows[i].first)
        << "device phases " << i - 1 << " and " << i << " overlap";
  }
  std::filesystem::remove_all(config.lock_dir);
}

// A candidate whose first run fails as an allocator does when evaluations beside it hold the
// memory: with company it is evaluated again alone and judged on that; alone, on its failure.
// The file it leaves (no sandbox here) tells its second run from its first.
TEST(LocalEvaluator, OutOfMemoryBesideOthersIsEvaluatedAgainAlone) {
  EngineConfig config = test_engine();
  config.sandbox = SandboxPolicy::kOff;
  config.lock_dir =
      make_private_directory(std::filesystem::temp_directory_path(), "cudal1-sched-locks-");
  const auto dir = make_private_directory(std::filesystem::temp_directory_path(), "cudal1-oom-");
  const auto write_candidate = [&](const std::string& name, bool always) {
    const auto marker = dir / (name + ".seen");
    std::ofstream(dir / (name + ".py"))
        << "import os\nimport torch\nimport torch.nn as nn\n\n\n"
           "class ModelNew(nn.Module):\n"
           "    def __init__(self, scale):\n"
           "        super().__init__()\n"
           "        self.scale = scale\n\n"
           "    def forward(self, x):\n"
           "        if "
        << (always ? "True" : "not os.path.exists(" + nlohmann::json(marker.string()).dump() + ")")
        << ":\n"
           "            open("
        << nlohmann::json(marker.string()).dump()
        << ", 'w').close()\n"
           "            raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
           "        return torch.relu(x * (2.0 * self.scale) + 2.0)\n";
    return dir / (name + ".py");
  };
  const auto once = write_candidate("once", false);
  const auto always = write_candidate("always", true);
  LocalEvaluator evaluator(config);
  const auto request_of = [&](const std::filesystem::path& candidate) {
    EvalRequest r = request_for("fast.py");
    r.candidate = candidate;
    return r;
  };
  std::vector<std::future<Verdict>> futures;
  for (const auto& candidate : {once, always, data("candidates/fast.py")})
    futures.push_back(evaluator.submit(request_of(candidate)));
  const Verdict recovered = futures[0].get();
  EXPECT_EQ(recovered.status, Status::kOk) << recovered.summary_line();
  ASSERT_TRUE(recovered.details.contains("memory_retry")) << recovered.details.dump();
  EXPECT_EQ(recovered.details["memory_retry"]["first"]["status"], "runtime_error");
  EXPECT_TRUE(recovered.details["phases"].contains("alone_wait_s"));
  const Verdict failing = futures[1].get();
  EXPECT_EQ(failing.status, Status::kRuntimeError) << failing.summary_line();
  EXPECT_TRUE(failing.details.contains("memory_retry"));
  EXPECT_EQ(futures[2].get().status, Status::kOk);
  // Alone from the start: its failure is its verdict, without a second run.
  const Verdict lone = evaluator.evaluate(request_of(always));
  EXPECT_EQ(lone.status, Status::kRuntimeError) << lone.summary_line();
  EXPECT_FALSE(lone.details.contains("memory_retry"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(config.lock_dir);
}

TEST(LocalEvaluator, InputErrorsArriveThroughTheFuture) {
  LocalEvaluator evaluator(test_engine());
  EvalRequest r = request_for("fast.py");
  r.task = data("tasks/no_model.py");
  auto f = evaluator.submit(r);
  EXPECT_THROW(f.get(), InputError);
}

TEST(LocalEvaluator, SameSeedReplaysTheSameTrials) {
  LocalEvaluator evaluator(test_engine());
  EvalRequest r = request_for("wrong.py");
  r.options.seed = 424242;
  const Verdict a = evaluator.evaluate(r);
  const Verdict b = evaluator.evaluate(r);
  EXPECT_EQ(a.seeds, b.seeds);
  EXPECT_EQ(a.max_abs_error, b.max_abs_error);
  EXPECT_EQ(a.error, b.error);
}

}  // namespace
}  // namespace cudal1
