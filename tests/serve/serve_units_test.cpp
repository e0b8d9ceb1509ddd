// The reward server's parts that need no worker: request bodies, query splitting, metrics text
// the replay of repeated requests and the order queued evaluations start in.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cudal1/serve/completion.hpp"
#include "cudal1/serve/metrics.hpp"
#include "cudal1/serve/request_replay.hpp"
#include "cudal1/serve/reward_protocol.hpp"
#include "cudal1/serve/reward_server.hpp"
#include "cudal1/serve/task_fair_queue.hpp"

namespace cudal1::serve {
namespace {

using nlohmann::json;

TaskCatalog two_tasks() {
  CatalogTask a;
  a.key = "level1/1_Relu";
  a.name = "1_Relu";
  CatalogTask b;
  b.key = "level2/7_Conv";
  b.name = "7_Conv";
  return TaskCatalog::of("/suite", {a, b});
}

int status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const BadRequest& e) {
    return e.status();
  }
  return 0;
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const BadRequest& e) {
    return e.what();
  }
  return "";
}

TEST(CompletionOfQuery, StripsThePromptPrefix) {
  EXPECT_EQ(completion_of_query("PROMPT and reply", "PROMPT").value_or("-"), " and reply");
  EXPECT_EQ(completion_of_query("whole query", "").value_or("-"), "whole query");
}

TEST(CompletionOfQuery, FindsThePromptEndingAfterAChangedBeginning) {
  // Longer than the 200 characters searched for, so the changed beginning is not among them.
  const std::string body = std::string(300, 'x') + " and the final instructions\n";
  const auto completion = completion_of_query("<|begin|>" + body + "the reply", "<s>" + body);
  ASSERT_TRUE(completion);
  EXPECT_EQ(*completion, "\nthe reply");
  // A short prompt is searched for whole.
  EXPECT_FALSE(completion_of_query("<|begin|>short prompt reply", "<s>short prompt"));
}

TEST(CompletionOfQuery, NothingWhenThePromptIsNotThere) {
  EXPECT_FALSE(completion_of_query("a reply alone", "a prompt that is elsewhere"));
}

TEST(CodeOfCompletion, LastModelNewBlock) {
  const auto code = code_of_completion(
      "## Performance Analysis\nfewer passes\n```python\nclass ModelNew:\n    pass\n```\n");
  ASSERT_TRUE(code.ok);
  EXPECT_NE(code.code.find("class ModelNew"), std::string::npos);
  EXPECT_NE(code.analysis.find("fewer passes"), std::string::npos);
  EXPECT_FALSE(code_of_completion("no code at all").ok);
  EXPECT_FALSE(code_of_completion("no code at all").problem.empty());
}

TEST(OpenRlhfRequest, ItemsInOrderWithCompletionsCut) {
  const auto catalog = two_tasks();
  const json body = {{"query", {"P1 reply one", "P2 reply two"}},
                     {"prompts", {"P1", "P2"}},
                     {"labels", {"level1/1_Relu", "level2/7_Conv"}}};
  const auto request = parse_openrlhf_request(body.dump(), catalog, 10);
  ASSERT_EQ(request.items.size(), 2u);
  EXPECT_EQ(request.items[0].task, "level1/1_Relu");
  EXPECT_EQ(*request.items[0].completion, " reply one");
  EXPECT_EQ(*request.items[1].completion, " reply two");
  // Without prompts the whole query is the completion.
  const json bare = {{"query", {"reply"}}, {"labels", {"level1/1_Relu"}}};
  EXPECT_EQ(*parse_openrlhf_request(bare.dump(), catalog, 10).items[0].completion, "reply");
}

TEST(OpenRlhfRequest, AQueryWithoutItsPromptIsAnsweredAsUnusable) {
  const json body = {
      {"query", {"reply only"}}, {"prompts", {"a prompt"}}, {"labels", {"level1/1_Relu"}}};
  const auto request = parse_openrlhf_request(body.dump(), two_tasks(), 10);
  EXPECT_FALSE(request.items[0].unusable.empty());
}

TEST(OpenRlhfRequest, BadBodiesAreRefusedWithTheField) {
  const auto catalog = two_tasks();
  const auto parse = [&](const std::string& text) {
    return [&, text] { parse_openrlhf_request(text, catalog, 2); };
  };
  EXPECT_EQ(status_of(parse("{not json")), 400);
  EXPECT_NE(message_of(parse("{not json")).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(status_of(parse("[1, 2]")), 400);
  EXPECT_NE(message_of(parse(R"({"labels": ["level1/1_Relu"]})")).find("\"query\" is missing"),
            std::string::npos);
  EXPECT_NE(message_of(parse(R"({"query": ["a", "b"], "labels": ["level1/1_Relu"]})"))
                .find("\"labels\" has 1 entries and \"query\" 2"),
            std::string::npos);
  EXPECT_NE(message_of(parse(R"({"query": ["a"], "labels": ["level9/1_No"]})"))
                .find("labels[0]: unknown task 'level9/1_No'"),
            std::string::npos);
  EXPECT_NE(message_of(parse(R"({"query": [3], "labels": ["level1/1_Relu"]})"))
                .find("query[0] must be a string"),
            std::string::npos);
  EXPECT_EQ(status_of(parse(R"({"query": ["a", "b", "c"], "labels": ["x", "y", "z"]})")), 413);
  EXPECT_EQ(
      status_of(parse(R"({"query": ["a"], "prompts": ["p", "q"], "labels": ["level1/1_Relu"]})")),
      400);
}

TEST(NativeRequest, ItemsStepGroupsAndRequestId) {
  const json body = {{"step", 7},
                     {"request_id", "abc"},
                     {"items",
                      {{{"task", "level1/1_Relu"}, {"code", "class ModelNew: pass"}, {"group", 3}},
                       {{"task", "level2/7_Conv"}, {"completion", "text"}, {"group", "g"}},
                       {{"task", "level2/7_Conv"}, {"completion", "text"}}}}};
  const auto request = parse_native_request(body.dump(), two_tasks(), 10);
  EXPECT_EQ(*request.step, 7);
  EXPECT_EQ(request.request_id, "abc");
  ASSERT_EQ(request.items.size(), 3u);
  EXPECT_EQ(*request.items[0].code, "class ModelNew: pass");
  EXPECT_EQ(*request.items[0].group, "3");
  EXPECT_EQ(*request.items[1].group, "g");
  EXPECT_FALSE(request.items[2].group);
}

TEST(NativeRequest, BadItemsAreRefusedWithTheirIndex) {
  const auto catalog = two_tasks();
  const auto message = [&](const json& body) {
    return message_of([&] { parse_native_request(body.dump(), catalog, 10); });
  };
  EXPECT_NE(message(json{{"items", 3}}).find("\"items\" must be a list"), std::string::npos);
  EXPECT_NE(message(json{{"items", {{{"code", "x"}}}}}).find("items[0].task is missing"),
            std::string::npos);
  EXPECT_NE(message(json{{"items", {{{"task", "level1/1_Relu"}}}}}).find("exactly one of"),
            std::string::npos);
  EXPECT_NE(
      message(json{{"items", {{{"task", "level1/1_Relu"}, {"code", "a"}, {"completion", "b"}}}}})
          .find("exactly one of"),
      std::string::npos);
  EXPECT_NE(
      message(json{{"items", {{{"task", "nope"}, {"code", "a"}}}}}).find("unknown task 'nope'"),
      std::string::npos);
  EXPECT_NE(message(json{{"items", {{{"task", "level1/1_Relu"}, {"code", "a"}, {"group", 1.5}}}}})
                .find("items[0].group"),
            std::string::npos);
  EXPECT_NE(message(json{{"step", "x"}, {"items", json::array()}}).find("\"step\""),
            std::string::npos);
}

TEST(Replies, OpenRlhfShapeAndNativeFields) {
  RewardResult ok;
  ok.task = "level1/1_Relu";
  ok.status = "ok";
  ok.speedup = 1.5;
  ok.raw_reward = 1.5;
  ok.reward = 1.2;
  ok.candidate_id = 4;
  ok.advantage = 0.7;
  RewardResult hack;
  hack.task = "level1/1_Relu";
  hack.status = "rejected";
  hack.flags = {"cached_output", "noisy"};
  const json reply = openrlhf_reply({ok, hack}, true);
  EXPECT_EQ(reply["rewards"], json({1.2, 0.0}));
  EXPECT_EQ(reply["scores"], json({1.5, 0.0}));
  EXPECT_EQ(reply["extra_logs"]["speedup"], json({1.5, 0.0}));
  EXPECT_EQ(reply["extra_logs"]["status"], json({"ok", "rejected"}));
  EXPECT_EQ(reply["extra_logs"]["flags"], json({"", "cached_output,noisy"}));
  EXPECT_EQ(reply["extra_logs"]["rejected"], json({0.0, 1.0}));
  EXPECT_FALSE(openrlhf_reply({ok}, false)["extra_logs"].contains("status"));
  const json native = native_reply({ok, hack}, "r1");
  EXPECT_EQ(native["request_id"], "r1");
  EXPECT_EQ(native["results"][0]["candidate_id"], 4);
  EXPECT_EQ(native["results"][0]["advantage"], 0.7);
  EXPECT_TRUE(native["results"][1]["speedup"].is_null());
  EXPECT_TRUE(native["results"][1]["candidate_id"].is_null());
}

TEST(RequestKey, TheSameJsonHoweverSpacedOrOrderedOnOneEndpoint) {
  const std::string body = R"({"items": [{"task": "t", "code": "x"}], "step": 3})";
  const std::string key = request_key("/v1/rewards", body);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(
      request_key("/v1/rewards", "{ \"step\":3,\n \"items\":[{\"code\":\"x\",\"task\":\"t\"}]}"),
      key);
  EXPECT_NE(request_key("/get_reward", body), key);
  EXPECT_NE(request_key("/v1/rewards", R"({"items": [{"task": "t", "code": "x"}], "step": 4})"),
            key);
  EXPECT_NE(request_key("/v1/rewards",
                        R"({"items": [{"task": "t", "code": "x"}], "step": 3, "request_id": "a"})"),
            key);
}

TEST(Metrics, PrometheusTextWithCumulativeBuckets) {
  Metrics metrics;
  metrics.count_evaluation("ok");
  metrics.count_evaluation("ok");
  metrics.count_evaluation("rejected");
  metrics.observe_raw_reward(0.0);
  metrics.observe_raw_reward(1.3);
  metrics.add_device_seconds("cuda:0", 2.5);
  metrics.observe_request("/v1/rewards", 200, 0.2);
  Gauges gauges;
  gauges.queue_depth = 3;
  const std::string page = metrics.exposition(gauges);
  EXPECT_NE(page.find("cudal1_evaluations_total{status=\"ok\"} 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("cudal1_evaluations_total{status=\"rejected\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_queue_depth 3\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_device_busy_seconds_total{device=\"cuda:0\"} 2.5\n"),
            std::string::npos);
  EXPECT_NE(page.find("cudal1_raw_reward_bucket{le=\"0\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_raw_reward_bucket{le=\"1.25\"} 1\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_raw_reward_bucket{le=\"1.5\"} 2\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_raw_reward_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_raw_reward_count 2\n"), std::string::npos);
  EXPECT_NE(page.find("cudal1_http_requests_total{endpoint=\"/v1/rewards\",code=\"200\"} 1\n"),
            std::string::npos);
  EXPECT_NE(page.find("# TYPE cudal1_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, WorkerLoadsBySideAndOrigin) {
  Metrics metrics;
  metrics.count_loads({{"reference", {{"loads", 3.0}, {"kept", 2.0}, {"context", 1.5}}},
                       {"candidate", {{"loads", 3.0}, {"ready", 1.0}}}});
  metrics.count_loads({{"candidate", {{"loads", 1.0}}}});
  metrics.count_loads(nullptr);  // a verdict without loads (a build failure)
  const std::string page = metrics.exposition(Gauges{});
  for (const char* line : {"cudal1_worker_loads_total{side=\"reference\",from=\"new\"} 1\n",
                           "cudal1_worker_loads_total{side=\"reference\",from=\"kept\"} 2\n",
                           "cudal1_worker_loads_total{side=\"candidate\",from=\"new\"} 3\n",
                           "cudal1_worker_loads_total{side=\"candidate\",from=\"ready\"} 1\n"}) {
    EXPECT_NE(page.find(line), std::string::npos) << line << page;
  }
}

TEST(Metrics, WorkerPoolsAsCountersAndIdleGauges) {
  Metrics metrics;
  Gauges gauges;
  gauges.worker_pools = {
      {"kept_references",
       {{"kept", 5}, {"taken", 3}, {"waiting", 2}, {"waits", 4}, {"waited_s", 7.5}}},
      {"ready_workers", {{"made", 8}, {"last_error", "none"}}}};
  const std::string page = metrics.exposition(gauges);
  EXPECT_NE(
      page.find("cudal1_worker_pool_events_total{pool=\"kept_references\",event=\"taken\"} 3\n"),
      std::string::npos)
      << page;
  EXPECT_NE(page.find("cudal1_worker_pool_events_total{pool=\"ready_workers\",event=\"made\"} 8\n"),
            std::string::npos);
  EXPECT_NE(page.find("cudal1_worker_pool_idle{pool=\"kept_references\"} 2\n"), std::string::npos);
  EXPECT_EQ(page.find("last_error"), std::string::npos);  // not a number
  EXPECT_EQ(page.find("event=\"waiting\""), std::string::npos);
  // Waits are events; the seconds waited are a counter of their own.
  EXPECT_NE(
      page.find("cudal1_worker_pool_events_total{pool=\"kept_references\",event=\"waits\"} 4\n"),
      std::string::npos);
  EXPECT_NE(page.find("cudal1_worker_pool_wait_seconds_total{pool=\"kept_references\"} 7.5\n"),
            std::string::npos)
      << page;
  EXPECT_EQ(page.find("event=\"waited_s\""), std::string::npos);
}

TEST(RequestReplay, IdenticalRequestsInFlightShareOneAnswer) {
  RequestReplay replay;
  std::atomic<int> computed{0};
  const auto slow = [&] {
    ++computed;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return Answer{200, "body"};
  };
  bool first_shared = true, second_shared = false;
  Answer second;
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    second = replay.answer_once("k", slow, second_shared);
  });
  const Answer first = replay.answer_once("k", slow, first_shared);
  other.join();
  EXPECT_EQ(computed.load(), 1);
  EXPECT_FALSE(first_shared);
  EXPECT_TRUE(second_shared);
  EXPECT_EQ(second.body, "body");
  // Once answered, a request is the store's to answer again (RewardService): not held here.
  bool later = true;
  replay.answer_once("k", slow, later);
  EXPECT_FALSE(later);
  EXPECT_EQ(computed.load(), 2);
}

TEST(RequestReplay, AFailureReachesTheWaitersAndIsNotKept) {
  RequestReplay replay;
  bool shared = false;
  std::atomic<bool> failing{false};
  std::thread other([&] {
    while (!failing.load()) std::this_thread::yield();
    bool waiter_shared = false;
    EXPECT_THROW(replay.answer_once(
                     "k",
                     [] {
                       return Answer{200, "not computed"};
                     },
                     waiter_shared),
                 std::runtime_error);
    EXPECT_TRUE(waiter_shared);
  });
  EXPECT_THROW(replay.answer_once(
                   "k",
                   [&]() -> Answer {
                     failing = true;
                     // Long enough for the waiter to find it in flight on a loaded machine.
                     std::this_thread::sleep_for(std::chrono::milliseconds(1000));
                     throw std::runtime_error("x");
                   },
                   shared),
               std::runtime_error);
  other.join();
  const Answer again = replay.answer_once(
      "k",
      [] {
        return Answer{200, "good"};
      },
      shared);
  EXPECT_FALSE(shared);
  EXPECT_EQ(again.body, "good");
}

// The order the evaluations of a GRPO step start in: spread across tasks, earliest first among
// tasks with as many running.
std::string taken(TaskFairQueue& queue) {
  auto [task, job] = queue.take();
  job();
  return task;
}

TEST(TaskFairQueue, AStepsGroupsStartSpreadAcrossTasks) {
  TaskFairQueue queue;
  std::vector<int> ran;
  // Two groups of three samples, as a step sends them: a's, then b's.
  for (int i = 0; i < 3; ++i) queue.push("a", [&ran, i] { ran.push_back(i); });
  for (int i = 0; i < 3; ++i) queue.push("b", [&ran, i] { ran.push_back(10 + i); });
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "b");  // a has one running, b none
  EXPECT_EQ(taken(queue), "a");  // one each: the earliest queued
  EXPECT_EQ(queue.running("a"), 2u);
  EXPECT_EQ(queue.running("b"), 1u);
  EXPECT_EQ(queue.running(), 3u);
  EXPECT_EQ(queue.queued(), 3u);
  EXPECT_EQ(taken(queue), "b");
  queue.done("a");  // a: 1 running, b: 2
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "b");  // the last one, whatever runs
  EXPECT_TRUE(queue.empty());
  // Each task's jobs in the order they came.
  EXPECT_EQ(ran, (std::vector<int>{0, 10, 1, 11, 2, 12}));
  for (int i = 0; i < 2; ++i) queue.done("a");
  for (int i = 0; i < 3; ++i) queue.done("b");
  EXPECT_EQ(queue.running(), 0u);
  EXPECT_EQ(queue.running("a"), 0u);
  EXPECT_THROW(queue.done("a"), std::logic_error);
  EXPECT_THROW(queue.take(), std::logic_error);
}

TEST(TaskFairQueue, ATaskThatFinishesGetsTheNextSlot) {
  TaskFairQueue queue;
  for (const char* task : {"a", "a", "b", "b", "c", "c"}) queue.push(task, [] {});
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "b");
  EXPECT_EQ(taken(queue), "c");
  queue.done("b");  // b has none running now: its second goes before a's and c's
  EXPECT_EQ(taken(queue), "b");
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "c");
}

TEST(TaskFairQueue, ArrivalOrderTakesTheFirstQueued) {
  TaskFairQueue queue(false);
  for (const char* task : {"a", "a", "b"}) queue.push(task, [] {});
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "a");
  EXPECT_EQ(taken(queue), "b");
  EXPECT_EQ(queue.running("a"), 2u);
}

TEST(LoopbackHost, OnlyThisMachine) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("10.0.0.5"));
  EXPECT_FALSE(is_loopback_host("::"));
}

}  // namespace
}  // namespace cudal1::serve
