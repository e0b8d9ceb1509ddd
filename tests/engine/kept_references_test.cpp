// Kept references (cudal1/eval/reference_pool.hpp) with real workers on the CPU: the evaluations
// of a task share a reference worker whose model is built again for each (a task with weights
// agrees with candidates built under every new seed), their verdicts are those of evaluations
// with their own references, a kept worker forgets the evaluation it served, only a reference is
// ever kept, and the pool's limits hold.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "cudal1/common/paths.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/eval/reference_pool.hpp"
#include "cudal1/worker/protocol.hpp"
#include "engine_test_support.hpp"

namespace cudal1 {
namespace {

namespace proto = worker_protocol;
namespace fs = std::filesystem;

EvalRequest seeded(EvalRequest r, std::uint64_t seed) {
  r.options.seed = seed;
  return r;
}

// linear_tanh (weights) with a candidate that builds the same layer.
EvalRequest linear_request(std::uint64_t seed) {
  EvalRequest r = engine_test::request_for("linear_same.py");
  r.task = engine_test::data("tasks/linear_tanh.py");
  return seeded(r, seed);
}

TEST(KeptReferences, TheEvaluationsOfATaskShareOneReferenceBuiltAgainForEach) {
  LocalEvaluator evaluator(engine_test::test_engine(0, true));
  const Verdict first = evaluator.evaluate(linear_request(7));
  ASSERT_EQ(first.status, Status::kOk) << first.summary_line() << first.error;
  if (!first.details.at("sandbox").value("forked", false))
    GTEST_SKIP() << "no warm workers here: references are kept only where workers are forked";
  EXPECT_FALSE(first.details.at("phases").contains("kept_references"));
  // The evaluation's own thread's CPU by phase: every phase it went through, within the total.
  const auto& cpu = first.details.at("phases").at("orchestrator_cpu_s");
  for (const char* phase : {"build", "load", "correctness", "timing", "total"})
    EXPECT_GE(cpu.value(phase, -1.0), 0.0) << phase << ": " << cpu.dump();
  EXPECT_GE(cpu.value("total", 0.0) + 1e-3, cpu.value("build", 0.0) + cpu.value("load", 0.0) +
                                                cpu.value("correctness", 0.0) +
                                                cpu.value("timing", 0.0))
      << cpu.dump();
  // Other seeds: the candidate's layer gets other weights, and so must the kept reference's.
  for (std::uint64_t seed : {8u, 9u}) {
    const Verdict next = evaluator.evaluate(linear_request(seed));
    ASSERT_EQ(next.status, Status::kOk) << seed << ": " << next.summary_line() << next.error;
    const auto& phases = next.details.at("phases");
    EXPECT_EQ(phases.value("kept_references", 0), 1) << phases.dump();
    EXPECT_EQ(phases.at("load_parts").at("reference").value("kept", 0.0), 1.0) << phases.dump();
    EXPECT_TRUE(next.details.at("sandbox").value("kept", false)) << next.details["sandbox"];
    // Its CPU since its reset is this evaluation's.
    EXPECT_TRUE(phases.at("worker_cpu_s").contains("reference")) << phases.dump();
  }
  const nlohmann::json pools = evaluator.worker_pools();
  EXPECT_GE(pools.at("kept_references").value("taken", 0), 2) << pools.dump();
  EXPECT_GE(pools.at("kept_references").value("kept", 0), 2) << pools.dump();
  EXPECT_TRUE(pools.contains("ready_workers")) << pools.dump();
  // Timing rounds, each in a pair of its own: the first takes a kept reference, the others
  // references it has not used (or new ones); the verdict stands.
  EvalRequest rounds = linear_request(10);
  rounds.options.timing.rounds = 3;
  const Verdict three = evaluator.evaluate(rounds);
  ASSERT_EQ(three.status, Status::kOk) << three.summary_line() << three.error;
  EXPECT_GE(three.details.at("phases").value("kept_references", 0), 1)
      << three.details.at("phases").dump();
  EXPECT_EQ(three.details.at("timing").at("rounds").size(), 3u);
  // Another task's evaluations do not get it; a wrong candidate and one that overrides the task
  // get the verdicts of evaluations with references of their own.
  LocalEvaluator own(engine_test::test_engine(0, false));
  for (const char* candidate : {"fast.py", "wrong.py", "overrides_task.py"}) {
    const EvalRequest request = seeded(engine_test::request_for(candidate), 7);
    const Verdict kept = evaluator.evaluate(request);
    const Verdict alone = own.evaluate(request);
    EXPECT_EQ(kept.status, alone.status) << candidate << ": " << kept.summary_line();
    EXPECT_EQ(engine_test::without_noisy(kept.flags), engine_test::without_noisy(alone.flags))
        << candidate;
    EXPECT_FALSE(alone.details.at("phases").contains("kept_references"));
  }
}

TEST(KeptReferences, WithOneReferencePerTaskConcurrentEvaluationsShareIt) {
  EngineConfig config = engine_test::test_engine(0, true);
  config.references_per_task = 1;
  config.reference_wait_s = 120;  // this busy machine's evaluations may take long
  LocalEvaluator evaluator(config);
  // Three of the task at once, one reference among them: the first starts it, the others wait
  // for it to be kept and take it in turn, each with its own model and seed.
  std::vector<std::future<Verdict>> running;
  for (std::uint64_t seed : {21u, 22u, 23u})
    running.push_back(evaluator.submit(linear_request(seed)));
  std::vector<Verdict> verdicts;
  for (auto& verdict : running) verdicts.push_back(verdict.get());
  int kept = 0, awaited = 0;
  for (const Verdict& v : verdicts) {
    ASSERT_EQ(v.status, Status::kOk) << v.summary_line() << v.error;
    if (!v.details.at("sandbox").value("forked", false) &&
        !v.details.at("sandbox").value("kept", false))
      GTEST_SKIP() << "no warm workers here: references are kept only where workers are forked";
    const auto& phases = v.details.at("phases");
    kept += phases.value("kept_references", 0);
    awaited += static_cast<int>(phases.at("load_parts").at("reference").value("awaited", 0.0));
  }
  const nlohmann::json pool = evaluator.worker_pools().at("kept_references");
  // The pool's own count: an evaluation that found it kept at once did not wait.
  EXPECT_EQ(kept, 2) << pool.dump();
  EXPECT_EQ(pool.value("taken", 0), 2) << pool.dump();
  EXPECT_GE(awaited, 1) << pool.dump();
  EXPECT_EQ(pool.value("wait_timeouts", -1), 0) << pool.dump();
  // Each its own weights: the same verdict as with references of their own.
  LocalEvaluator own(engine_test::test_engine(0, false));
  const Verdict alone = own.evaluate(linear_request(23));
  EXPECT_EQ(verdicts[2].status, alone.status);
  EXPECT_EQ(engine_test::without_noisy(verdicts[2].flags), engine_test::without_noisy(alone.flags));
}

// A worker started as the engine starts one without a sandbox, for the protocol's own tests.
std::unique_ptr<WorkerClient> plain_worker(const fs::path& dir, const std::string& name) {
  WorkerSpec spec;
  spec.name = name;
  spec.program = CUDAL1_TEST_WORKER;
  spec.log_file = dir / (name + ".log");
  return WorkerClient::start(spec);
}

wire::Message call(WorkerClient& worker, const nlohmann::json& request) {
  return worker.call(request, Clock::now() + std::chrono::seconds(120));
}

nlohmann::json load_request(const std::string& role, std::uint64_t init_seed) {
  nlohmann::json load = {{proto::request::kOp, proto::op::kLoad},
                         {proto::request::kRole, role},
                         {proto::request::kTask, engine_test::data("tasks/linear_tanh.py")},
                         {proto::request::kDevice, "cpu"},
                         {proto::request::kInitSeed, init_seed}};
  if (role == "candidate")
    load[proto::request::kCandidate] = engine_test::data("candidates/linear_same.py");
  return load;
}

nlohmann::json first_call_digests(WorkerClient& worker) {
  return call(worker, {{proto::request::kOp, proto::op::kFirstCall}, {proto::request::kSeed, 5}})
      .header.at(proto::reply::kOutputDigests);
}

TEST(KeptReferences, ResetForgetsTheEvaluationAndReloadBuildsTheModelForTheNext) {
  const fs::path dir = make_private_directory(fs::temp_directory_path(), "kept-reference-");
  auto worker = plain_worker(dir, "reference");
  call(*worker, load_request("reference", 1));
  const nlohmann::json seed_one = first_call_digests(*worker);
  // Reload before a reset is refused: the model of the evaluation it serves is still there.
  EXPECT_THROW(
      call(*worker, {{proto::request::kOp, proto::op::kReload}, {proto::request::kInitSeed, 2}}),
      WorkerError);
  const auto reset = call(*worker, {{proto::request::kOp, proto::op::kReset}});
  EXPECT_TRUE(reset.header.contains(proto::reply::kCpuByOp)) << reset.header.dump();
  // Nothing of it is left to call.
  EXPECT_THROW(
      call(*worker, {{proto::request::kOp, proto::op::kFirstCall}, {proto::request::kSeed, 5}}),
      WorkerError);
  const auto reload = call(*worker, {{proto::request::kOp, proto::op::kReload},
                                     {proto::request::kInitSeed, 2},
                                     {proto::request::kDevice, "cpu"}});
  EXPECT_TRUE(reload.header.contains(proto::reply::kLoadParts)) << reload.header.dump();
  EXPECT_LT(reload.header.value(proto::reply::kCpuS, 1e9), 60.0) << reload.header.dump();
  EXPECT_NE(first_call_digests(*worker), seed_one);  // other weights
  call(*worker, {{proto::request::kOp, proto::op::kReset}});
  call(*worker, {{proto::request::kOp, proto::op::kReload},
                 {proto::request::kInitSeed, 1},
                 {proto::request::kDevice, "cpu"}});
  EXPECT_EQ(first_call_digests(*worker), seed_one);  // the first model's weights again
  worker->shutdown();
  fs::remove_all(dir);
}

TEST(KeptReferences, OnlyAReferenceWorkerIsEverKept) {
  const fs::path dir = make_private_directory(fs::temp_directory_path(), "kept-candidate-");
  auto worker = plain_worker(dir, "candidate");
  call(*worker, load_request("candidate", 1));
  EXPECT_THROW(call(*worker, {{proto::request::kOp, proto::op::kReset}}), WorkerError);
  EXPECT_THROW(
      call(*worker, {{proto::request::kOp, proto::op::kReload}, {proto::request::kInitSeed, 2}}),
      WorkerError);
  worker->shutdown();
  fs::remove_all(dir);
}

KeptReference idle_worker(const fs::path& dir, const std::string& name, std::size_t uses = 0,
                          std::uint64_t id = 0) {
  KeptReference kept;
  kept.id = id;
  kept.client = plain_worker(dir, name);
  kept.log = dir / (name + ".log");
  kept.device_id = "cpu";
  kept.device = "cpu";
  kept.uses = uses;
  return kept;
}

TEST(ReferencePool, KeepsWithinItsLimitsAndForgetsIdleWorkers) {
  const fs::path work = make_private_directory(fs::temp_directory_path(), "kept-pool-");
  const fs::path dir = make_private_directory(fs::temp_directory_path(), "kept-logs-");
  {
    ReferencePoolLimits limits;
    limits.per_key = 2;
    limits.per_cpu = 3;
    limits.max_uses = 4;
    limits.idle_s = 3;
    ReferencePool pool(limits, work);
    pool.keep("a", idle_worker(dir, "a1"));
    pool.keep("a", idle_worker(dir, "a2"));
    pool.keep("a", idle_worker(dir, "a3"));  // past per_key: the oldest of "a" goes
    EXPECT_EQ(pool.available("a"), 2u);
    pool.keep("b", idle_worker(dir, "b1"));
    pool.keep("b", idle_worker(dir, "b2"));  // past per_cpu: the oldest of the device goes
    EXPECT_EQ(pool.available("a") + pool.available("b"), 3u);
    pool.keep("b", idle_worker(dir, "b3", /*uses=*/4));  // served its evaluations: ends
    EXPECT_EQ(pool.stats().value("retired", 0), 1) << pool.stats().dump();
    // The most recently kept comes back first, its log moved under the pool's folder.
    std::optional<KeptReference> taken = pool.take("b", {});
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->log.parent_path().parent_path(), work) << taken->log;
    EXPECT_TRUE(taken->client->alive());
    EXPECT_FALSE(pool.take("c", {}));
    // Not one an evaluation used already: it takes another, or none.
    pool.keep("c", idle_worker(dir, "c1", 0, 41));
    EXPECT_FALSE(pool.take("c", {41}));
    EXPECT_EQ(pool.available("c"), 1u);
    // One that died while it waited is dropped, not handed out.
    KeptReference f = idle_worker(dir, "f1");
    WorkerClient* f_client = f.client.get();  // the pool owns it from here on
    pool.keep("f", std::move(f));
    ASSERT_EQ(pool.available("f"), 1u);
    f_client->kill();
    const auto until_dead = Clock::now() + std::chrono::seconds(30);
    while (f_client->alive() && Clock::now() < until_dead)  // its exit is cached once seen
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(pool.take("f", {}));
    EXPECT_EQ(pool.stats().value("dead", 0), 1) << pool.stats().dump();
    taken->client->shutdown();
    EXPECT_TRUE(pool.evict("cpu"));
    // Idle past idle_s: shut down by the pool itself.
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (pool.stats().value("waiting", 1) > 0 && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(pool.stats().value("waiting", 1), 0) << pool.stats().dump();
    EXPECT_GE(pool.stats().value("expired", 0), 1) << pool.stats().dump();
    EXPECT_FALSE(pool.evict("cpu"));
    // An evaluation that must run alone: every one of the device goes.
    pool.keep("d", idle_worker(dir, "d1"));
    pool.keep("e", idle_worker(dir, "e1"));
    pool.evict_all("cpu");
    EXPECT_EQ(pool.stats().value("waiting", 1), 0) << pool.stats().dump();
  }
  EXPECT_FALSE(fs::exists(work) && !fs::is_empty(work));
  fs::remove_all(work);
  fs::remove_all(dir);
}

TEST(ReferencePool, AnEvaluationWaitsForItsTasksReferenceWithinTheLimit) {
  const fs::path work = make_private_directory(fs::temp_directory_path(), "kept-wait-");
  const fs::path dir = make_private_directory(fs::temp_directory_path(), "kept-wait-logs-");
  {
    ReferencePool pool(ReferencePoolLimits{}, work);
    const auto soon = [] { return Clock::now() + std::chrono::seconds(30); };
    // No limit: nothing to wait for; the lease of the one to start.
    ReferenceTurn free = pool.take_when_free("a", {}, 0, soon(), nullptr);
    EXPECT_FALSE(free.kept);
    EXPECT_TRUE(free.lease);
    free.lease.reset();
    // Fewer in use than the limit: none to wait for either, and the one to start is counted at
    // once: a second asking with the same limit waits.
    ReferenceTurn first = pool.take_when_free("a", {}, 1, soon(), nullptr);
    EXPECT_FALSE(first.kept);
    ASSERT_TRUE(first.lease);
    EXPECT_EQ(pool.stats().value("waits", -1), 0) << pool.stats().dump();
    // At the limit: it waits until the one in use is kept, and takes it.
    // Started on this thread: a worker dies with the thread that started it (PR_SET_PDEATHSIG).
    KeptReference a1 = idle_worker(dir, "a1", 0, 7);
    std::thread keeper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      pool.keep("a", std::move(a1));
      first.lease.reset();
    });
    ReferenceTurn second = pool.take_when_free("a", {}, 1, soon(), nullptr);
    keeper.join();
    ASSERT_TRUE(second.kept);
    EXPECT_EQ(second.kept->id, 7u);
    EXPECT_TRUE(second.kept->lease);  // in use again
    EXPECT_EQ(pool.stats().value("waits", 0), 1) << pool.stats().dump();
    EXPECT_GT(pool.stats().value("waited_s", 0.0), 0.0) << pool.stats().dump();
    // Another task's are not its own.
    EXPECT_TRUE(pool.take_when_free("b", {}, 1, soon(), nullptr).lease);
    // A lease within a limit: none at the limit, one below it or without a limit.
    EXPECT_FALSE(pool.lease_within("a", 1));
    EXPECT_TRUE(pool.lease_within("a", 2));
    EXPECT_TRUE(pool.lease_within("a", 0));
    EXPECT_TRUE(pool.lease_within("c", 1));
    // One in use that ends without being kept: the waiter starts its own.
    std::thread ender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      second.kept->lease.reset();
    });
    ReferenceTurn third = pool.take_when_free("a", {}, 1, soon(), nullptr);
    ender.join();
    EXPECT_FALSE(third.kept);
    EXPECT_TRUE(third.lease);
    // Past its deadline: the lease of one to start anyway, counted as a time-out.
    ReferenceTurn late =
        pool.take_when_free("a", {}, 1, Clock::now() + std::chrono::milliseconds(300), nullptr);
    EXPECT_TRUE(late.lease);
    EXPECT_EQ(pool.stats().value("wait_timeouts", 0), 1) << pool.stats().dump();
    // Cancelled: neither.
    std::atomic<bool> cancel{false};
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel = true;
    });
    ReferenceTurn cancelled =
        pool.take_when_free("a", {}, 1, soon(), [&] { return cancel.load(); });
    canceller.join();
    EXPECT_FALSE(cancelled.kept);
    EXPECT_FALSE(cancelled.lease);
    EXPECT_EQ(pool.stats().value("wait_timeouts", 0), 1) << pool.stats().dump();
    second.kept->client->shutdown();
  }
  fs::remove_all(work);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cudal1
