// What travels on the queue: a job (sources and every option) and its result must come back as
// they went out, and job ids must be the same for the same work from the same submitter.
#include "cudal1/queue/job.hpp"

#include <gtest/gtest.h>

#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/queue/job_files.hpp"
#include "cudal1/queue/job_result.hpp"
#include "cudal1/queue/keys.hpp"

namespace cudal1::queue {
namespace {

EvalOptions unusual_options() {
  EvalOptions o;
  o.device = "cuda";
  o.seed = 18446744073709551557ULL;  // above 2^63: must not pass through a double or int64
  o.tolerance = Tolerance::parse("0.001,2.5e-05");
  o.trials = 7;
  o.timing.budget_s = 4.5;
  o.timing.noise.max_noise = 0.005;
  o.timing.noise.min_samples = 33;
  o.timing.mode = "window";
  o.timing.rounds = 3;
  o.timing.calibration = "on";
  o.timing.streams = 8;
  o.timing.cuda_connections = 0;  // not the default (1): the caller's environment decides
  o.timing.own_kernels = {"fused_gelu", "rms_norm"};
  o.timing.spot_check_every = 5;
  o.limits.build_s = 1200;
  o.limits.correctness_s = 1800;
  o.limits.memory_bytes = 17179869184ULL;
  o.limits.gpu_memory_fraction = 0.5;
  o.trace_activity = false;
  o.require_custom_kernel = true;
  return o;
}

TEST(QueueJob, EveryOptionSurvivesTheTrip) {
  const EvalOptions sent = unusual_options();
  const nlohmann::json wire = options_to_json(sent);
  const EvalOptions got = options_from_json(nlohmann::json::parse(wire.dump()));
  EXPECT_EQ(options_to_json(got), wire);
  EXPECT_EQ(got.seed, sent.seed);
  EXPECT_EQ(got.tolerance.for_dtype("float32").atol, 0.001);
  EXPECT_EQ(got.tolerance.for_dtype("float16").rtol, 2.5e-05);
  EXPECT_EQ(got.timing.own_kernels, sent.timing.own_kernels);
  EXPECT_EQ(got.timing.streams, 8u);
  EXPECT_EQ(got.timing.cuda_connections, 0u);
  EXPECT_EQ(got.timing.calibration, "on");
  EXPECT_EQ(got.limits.memory_bytes, sent.limits.memory_bytes);
  EXPECT_TRUE(got.require_custom_kernel);
  EXPECT_FALSE(got.trace_activity);
}

TEST(QueueJob, DefaultsAreKeptForFieldsAnOlderSubmitterDidNotSend) {
  const EvalOptions got = options_from_json({{"trials", 2}});
  const EvalOptions defaults;
  EXPECT_EQ(got.trials, 2u);
  EXPECT_EQ(options_to_json(got)["timing"], options_to_json(defaults)["timing"]);
  EXPECT_FALSE(got.seed.has_value());
}

TEST(QueueJob, AFieldOfTheWrongTypeIsNamed) {
  try {
    options_from_json({{"timing", {{"budget_s", "thirty"}}}});
    FAIL() << "a string budget was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("budget_s"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Job::from_json({{"id", "x"}}), std::runtime_error);
}

TEST(QueueJob, SourcesAndPathsSurviveTheTrip) {
  Job job;
  job.id = "abc";
  job.submitter = "bench:host:1234";
  job.task_path = "/suite/level1/1_Relu.py";
  job.task_source = "import torch\n# \xc3\xa9\n";
  job.candidate_path = "/out/solutions/level1/1_Relu.py";
  job.candidate_source = "class ModelNew: pass\n";
  job.options = unusual_options();
  job.submitted_at = 1700000000.25;
  const Job got = Job::from_json(nlohmann::json::parse(job.to_json().dump()));
  EXPECT_EQ(got.to_json(), job.to_json());
}

TEST(QueueJob, IdsAreStableAndTellRepeatsApart) {
  const nlohmann::json options = options_to_json(EvalOptions{});
  const std::string first = job_id("bench:a", "task", "cand", options, 0);
  EXPECT_EQ(first, job_id("bench:a", "task", "cand", options, 0));
  EXPECT_NE(first, job_id("bench:a", "task", "cand", options, 1));
  EXPECT_NE(first, job_id("bench:b", "task", "cand", options, 0));
  EXPECT_NE(first, job_id("bench:a", "task", "cand2", options, 0));
  EvalOptions seeded;
  seeded.seed = 7;
  EXPECT_NE(first, job_id("bench:a", "task", "cand", options_to_json(seeded), 0));
}

TEST(QueueJobFiles, SourcesKeepTheirNamesAndMessagesGetTheSubmittersPaths) {
  const auto root = make_private_directory(std::filesystem::temp_directory_path(), "cudal1-jobs-");
  Job job;
  job.id = "0123456789abcdef0123";
  job.task_path = "/suite/level1/1_Relu.py";
  job.task_source = "task\n";
  job.candidate_path = "/out/../../etc/passwd/..";  // not a plain name: not used as one
  job.candidate_source = "candidate\n";
  std::filesystem::path dir;
  {
    JobFiles files(root, job, "1700000000000-0");
    dir = files.task().parent_path().parent_path();
    EXPECT_EQ(files.task().filename(), "1_Relu.py");
    EXPECT_EQ(files.candidate().filename(), "candidate.py");
    EXPECT_EQ(files.candidate().parent_path().parent_path(), dir);
    EXPECT_EQ(read_file(files.task()), "task\n");
    EXPECT_EQ(read_file(files.candidate()), "candidate\n");
    EXPECT_EQ(files.as_submitted("File \"" + files.task().string() + "\", line 3"),
              "File \"/suite/level1/1_Relu.py\", line 3");
  }
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the job's files outlived it";
  std::filesystem::remove_all(root);
}

TEST(QueueJobResult, AVerdictComesBackWhole) {
  Verdict verdict;
  verdict.status = Status::kOk;
  verdict.correct = true;
  verdict.speedup = 1.5;
  verdict.details["timing"] = {{"mode", "queued"}};
  verdict.finalize();
  JobResult result = JobResult::of_verdict("j1", verdict);
  result.worker = "gpu7-cuda0";
  result.deliveries = 2;
  const JobResult got = JobResult::from_json(nlohmann::json::parse(result.to_json().dump()));
  EXPECT_EQ(got.worker, "gpu7-cuda0");
  EXPECT_EQ(got.deliveries, 2u);
  EXPECT_EQ(got.verdict_or_throw().to_json(), verdict.to_json());
}

TEST(QueueJobResult, ErrorsAreThrownAsTheLocalEngineThrowsThem) {
  const JobResult input = JobResult::from_json(
      JobResult::of_input_error(
          "j2", InputError("cand.py:3: syntax error", InputError::Subject::kCandidate))
          .to_json());
  try {
    input.verdict_or_throw();
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.subject(), InputError::Subject::kCandidate);
    EXPECT_STREQ(e.what(), "cand.py:3: syntax error");
  }
  const JobResult internal =
      JobResult::from_json(JobResult::of_internal_error("j3", "worker died").to_json());
  EXPECT_THROW(internal.verdict_or_throw(), std::runtime_error);
  try {
    internal.verdict_or_throw();
  } catch (const InputError&) {
    FAIL() << "an internal error became an InputError";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("worker died"), std::string::npos);
  }
}

TEST(QueueJob, ABuildJobKeepsItsBuildFields) {
  Job job;
  job.id = "j";
  job.submitter = "builds:gpu7-cuda0";
  job.task_source = "t";
  job.candidate_source = "c";
  EXPECT_FALSE(Job::from_json(job.to_json()).to_json().contains("build"));
  job.build = {{"key", "k"}, {"toolchain", {{"torch", "2.11.0"}}}, {"init_seed", 7}};
  EXPECT_EQ(Job::from_json(job.to_json()).build, job.build);
  nlohmann::json wrong = job.to_json();
  wrong["build"] = "not an object";
  EXPECT_THROW(Job::from_json(wrong), std::runtime_error);
}

TEST(QueueJobResult, ABuildAnswerComesBackWhole) {
  const nlohmann::json answer = {{"key", "k"}, {"digest", "d"}, {"signature", "s"}};
  const JobResult back = JobResult::from_json(JobResult::of_build("j", answer).to_json());
  EXPECT_EQ(back.build, answer);
  EXPECT_FALSE(back.verdict);
}

TEST(QueueKeys, BuildStreamsAreTheirOwnKind) {
  EXPECT_EQ(keys::build_kind("0123"), "build-0123");
  EXPECT_TRUE(keys::is_build_kind(keys::build_kind("0123")));
  EXPECT_FALSE(keys::is_build_kind(keys::kCuda));
  EXPECT_EQ(keys::jobs(keys::build_kind("0123")), "cudal1:jobs:build-0123");
}

}  // namespace
}  // namespace cudal1::queue
