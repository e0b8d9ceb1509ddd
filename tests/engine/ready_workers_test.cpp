// Ready workers (cudal1/eval/ready_workers.hpp) with real forked workers on the CPU: made ahead,
// taken by evaluations whose verdicts are those of workers forked for them, given a role only
// through their folder and load; a recipe that cannot make any leaves evaluations to fork
// their own. (The examples' CPU tests run with ready workers too, extension builds included, and
// check that no worker builds again on load.)
#include "cudal1/eval/ready_workers.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "cudal1/common/paths.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/worker/protocol.hpp"
#include "engine_test_support.hpp"

namespace cudal1 {
namespace {

namespace proto = worker_protocol;
namespace fs = std::filesystem;

EvalRequest cpu_request(const std::string& candidate) {
  EvalRequest r = engine_test::request_for(candidate);
  r.options.seed = 7;
  return r;
}

TEST(ReadyWorkers, EvaluationsTakeThemAndKeepTheirVerdicts) {
  LocalEvaluator evaluator(engine_test::test_engine(2));
  const Verdict fast = evaluator.evaluate(cpu_request("fast.py"));
  ASSERT_EQ(fast.status, Status::kOk) << fast.summary_line() << fast.error;
  const auto& phases = fast.details.at("phases");
  // Both workers of the first pair were made ahead (the makers start with the evaluation).
  EXPECT_GE(phases.value("ready_workers", 0), 2) << phases.dump();
  const auto& parts = phases.at("load_parts");
  EXPECT_GE(parts.at("reference").value("ready", 0.0), 1.0) << parts.dump();
  EXPECT_GE(parts.at("candidate").value("ready", 0.0), 1.0) << parts.dump();
  if (fast.details.at("sandbox").value("forked", false)) {
    EXPECT_TRUE(fast.details.at("sandbox").value("ready", false)) << fast.details["sandbox"];
  }

  // A wrong candidate and one that overrides the task, on ready workers and on their own:
  // the same statuses and flags, with the same seed.
  LocalEvaluator forking(engine_test::test_engine(0));
  for (const char* candidate : {"wrong.py", "overrides_task.py"}) {
    const Verdict ready = evaluator.evaluate(cpu_request(candidate));
    const Verdict own = forking.evaluate(cpu_request(candidate));
    EXPECT_EQ(ready.status, own.status) << candidate << ": " << ready.summary_line();
    EXPECT_EQ(engine_test::without_noisy(ready.flags), engine_test::without_noisy(own.flags))
        << candidate;
    EXPECT_FALSE(own.details.at("phases").contains("ready_workers"));
  }
}

ReadyRecipe cpu_recipe(const fs::path& worker, std::size_t target) {
  ReadyRecipe recipe;
  recipe.containment.program = worker;
  recipe.containment.device = "cpu";
  recipe.containment.lock_dir = make_private_directory(fs::temp_directory_path(), "ready-locks-");
  recipe.containment.environment = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  recipe.containment.cpu_seconds = 600;
  recipe.target = target;
  recipe.policy = SandboxPolicy::kAuto;
  recipe.prepare_s = 120;
  recipe.device_id = "cpu";
  recipe.key = "test|" + worker.string();
  return recipe;
}

TEST(ReadyWorkers, AReadyWorkerGetsItsRoleThroughItsFolderAndLoad) {
  const fs::path work = make_private_directory(fs::temp_directory_path(), "ready-work-");
  {
    ReadyWorkers pool(1, nullptr, work);
    const ReadyRecipe recipe = cpu_recipe(CUDAL1_TEST_WORKER, 1);
    std::optional<ReadyWorker> ready = pool.take(recipe);
    ASSERT_TRUE(ready);
    ASSERT_TRUE(ready->client->alive());
    // prepare_device made the device's part of a load (on the CPU: nothing to make).
    EXPECT_TRUE(ready->parts.contains("context")) << ready->parts.dump();
    // Its inputs come after its fork, into the folder its view shows.
    WorkerContainment role = recipe.containment;
    role.role = "reference";
    role.inputs = {engine_test::data("tasks/scale_relu.py")};
    const auto variables = assign_ready_worker(role, ready->contained);
    EXPECT_TRUE(variables.empty());  // a reference builds nothing
    ASSERT_EQ(ready->contained.input_paths.size(), 1u);
    ready->client->assign("reference", ready->log, nullptr);
    const auto reply =
        ready->client->call({{proto::request::kOp, proto::op::kLoad},
                             {proto::request::kRole, "reference"},
                             {proto::request::kTask, ready->contained.input_paths[0]},
                             {proto::request::kDevice, ready->contained.worker_device},
                             {proto::request::kInitSeed, 1}},
                            Clock::now() + std::chrono::seconds(120));
    EXPECT_TRUE(reply.header.value(proto::reply::kOk, false)) << reply.header.dump();
    // Its timer is the load's own, made now.
    EXPECT_EQ(reply.header.at(proto::reply::kTimer).value(proto::timer::kClock, std::string()),
              "steady_clock")
        << reply.header.dump();
    // A second prepare_device is refused.
    EXPECT_THROW(ready->client->call({{proto::request::kOp, proto::op::kPrepareDevice}},
                                     Clock::now() + std::chrono::seconds(30)),
                 WorkerError);
    const auto stats = pool.stats();
    EXPECT_EQ(stats.value("taken", 0), 1);
  }
  // The pool's folder goes with it.
  EXPECT_TRUE(fs::is_empty(work));
  fs::remove_all(work);
}

TEST(ReadyWorkers, WhenNoneCanBeMadeTheEvaluationsForkTheirOwn) {
  const fs::path work = make_private_directory(fs::temp_directory_path(), "ready-work-");
  {
    ReadyWorkers pool(2, nullptr, work);
    ReadyRecipe recipe = cpu_recipe(CUDAL1_TEST_WORKER, 2);
    recipe.prepare_s = 0;  // no time for prepare_device: every worker made fails
    EXPECT_FALSE(pool.take(recipe));
    const auto stats = pool.stats();
    EXPECT_GE(stats.value("failed", 0), 1) << stats.dump();
    EXPECT_TRUE(stats.contains("last_error")) << stats.dump();
  }
  fs::remove_all(work);
}

}  // namespace
}  // namespace cudal1
