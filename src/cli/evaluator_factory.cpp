#include "evaluator_factory.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>

#include "cudal1/common/error.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/eval/device_admission.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/eval/reference_pool.hpp"
#ifdef CUDAL1_WITH_QUEUE
#include "cudal1/queue/queue_evaluator.hpp"
#include "cudal1/queue/redis_address.hpp"
#endif

namespace cudal1::cli {

std::string stable_submitter(const std::string& command, const std::filesystem::path& work) {
  const std::string path =
      std::filesystem::weakly_canonical(std::filesystem::absolute(work)).string();
  // The path's hash keeps the name short and free of separators; the host keeps two machines
  // with the same path apart.
  return fmt::format("{}:{}:{}", command, host_name(), sha256_hex(path).substr(0, 16));
}

namespace {

// `text` as a whole number from `least` to `most` (all of it a number), or nullopt.
std::optional<long long> whole_number_within(const std::string& text, long long least,
                                             long long most) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || value < least || value > most) return std::nullopt;
  return value;
}

}  // namespace

std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSettings& given) {
  EvaluatorSettings settings = given;
  settings.engine.sandbox = parse_sandbox_policy(settings.sandbox);
  settings.engine.warm_workers = settings.warm_workers != "off";
  settings.engine.ready_workers = parse_ready_workers(settings.ready_workers);
  apply_keep_references(settings.keep_references, settings.engine);
  apply_task_references(settings.task_references, settings.engine);
  if (settings.queue.empty()) {
    require_sandbox_if_on(settings.engine.sandbox);
    return std::make_unique<LocalEvaluator>(settings.engine);
  }
#ifdef CUDAL1_WITH_QUEUE
  queue::QueueSettings queue;
  queue.address = queue::parse_redis_url(settings.queue);
  queue.engine = settings.engine;
  queue.submitter = settings.submitter;
  if (queue.submitter.empty()) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    queue.submitter =
        fmt::format("{}:{}:{}", host_name(), ::getpid(),
                    std::chrono::duration_cast<std::chrono::microseconds>(now).count());
  }
  queue.note = [](const std::string& text) { std::cerr << "cudal1: queue: " << text << std::endl; };
  return std::make_unique<queue::QueueEvaluator>(std::move(queue));
#else
  throw InputError(
      "--queue: this cudal1 was built without Redis support (no libhiredis-dev, or "
      "-DCUDAL1_QUEUE=OFF); install libhiredis-dev and rebuild, or leave --queue out to evaluate "
      "on this machine");
#endif
}

void add_queue_option(CLI::App& command, std::string& queue) {
  command.add_option("--queue", queue,
                     "evaluate on the workers of a Redis queue, redis://[:PASSWORD@]HOST:PORT[/DB] "
                     "(password also from $CUDAL1_REDIS_PASSWORD; see docs/scale-out.md)");
}

void add_sandbox_option(CLI::App& command, std::string& policy) {
  command
      .add_option("--sandbox", policy,
                  "contain every worker process (build, reference, candidate) with bubblewrap: "
                  "own PID, mount and network namespaces, the task read-only, no secrets "
                  "(docs/evaluation.md, \"Security model\"); auto: where it works, on: refuse "
                  "to evaluate without it, off: never")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

void add_warm_workers_option(CLI::App& command, std::string& choice) {
  command
      .add_option("--warm-workers", choice,
                  "on: reference and candidate workers are forks of a process per device that "
                  "imported PyTorch once, each contained as a started one is (docs/evaluation.md, "
                  "\"Warm workers\"); off: every worker starts and imports PyTorch on its own")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
}

void add_keep_references_option(CLI::App& command, std::string& choice) {
  command
      .add_option("--keep-references", choice,
                  "on: a reference worker that served an evaluation of a task serves the next "
                  "one of the same task, its model built again (docs/evaluation.md, \"Kept "
                  "references\"; the candidate's worker is always new), up to " +
                      std::to_string(ReferencePoolLimits{}.per_device) + " kept per GPU; N (1 to " +
                      std::to_string(kMaxKeptPerGpu) +
                      "): on, with up to N kept per GPU; off: each evaluation starts its own; "
                      "needs --warm-workers on")
      ->check([](const std::string& value) -> std::string {
        try {
          EngineConfig probe;
          apply_keep_references(value, probe);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      })
      ->capture_default_str();
}

void apply_keep_references(const std::string& choice, EngineConfig& engine) {
  engine.keep_references = choice != "off";
  engine.kept_references_per_gpu = 0;
  if (choice == "on" || choice == "off") return;
  const auto count = whole_number_within(choice, 1, static_cast<long long>(kMaxKeptPerGpu));
  if (!count) {
    throw InputError(
        fmt::format("--keep-references {}: give on, off or how many to keep per GPU (1 to {})",
                    choice, kMaxKeptPerGpu));
  }
  engine.kept_references_per_gpu = static_cast<std::size_t>(*count);
}

void add_ready_workers_option(CLI::App& command, std::string& choice) {
  command
      .add_option("--ready-workers", choice,
                  "warm workers kept ready per device with their CUDA context made, for the "
                  "evaluations to take, made while fewer than " +
                      std::to_string(DeviceAdmission::kQuietBelow) +
                      " evaluations are on the device (docs/evaluation.md, \"Ready workers\"); "
                      "auto: " +
                      std::to_string(kReadyWorkersPerGpu) +
                      " per GPU, none on the CPU; 0: none; needs --warm-workers on")
      ->check([](const std::string& value) -> std::string {
        try {
          parse_ready_workers(value);
          return "";
        } catch (const InputError& e) {
          return e.what();
        }
      })
      ->capture_default_str();
}

int parse_ready_workers(const std::string& choice) {
  if (choice == "auto") return -1;
  constexpr int kMost = 256;
  const auto count = whole_number_within(choice, 0, kMost);
  if (!count)
    throw InputError(fmt::format(
        "--ready-workers '{}' is not understood: use auto or a whole number from 0 to {}", choice,
        kMost));
  return static_cast<int>(*count);
}

void add_task_references_option(CLI::App& command, std::size_t& count) {
  command
      .add_option(
          "--task-references", count,
          "at most N reference workers of one task per GPU at once: an evaluation of "
          "the task beyond them waits (a minute at most) for one to be kept instead of "
          "starting its own, so that a GRPO group's samples share a few (docs/evaluation.md, "
          "\"Kept references\"); 0: no limit; needs --keep-references and --warm-workers")
      ->check(CLI::Range(std::size_t{0}, kMaxKeptPerGpu))
      ->capture_default_str();
}

void apply_task_references(std::size_t count, EngineConfig& engine) {
  engine.references_per_task = count;
  if (count > 0 && (!engine.keep_references || !engine.warm_workers))
    throw InputError(fmt::format(
        "--task-references {}: references are shared only where they are kept; leave out "
        "--keep-references off and --warm-workers off, or give --task-references 0",
        count));
}

}  // namespace cudal1::cli
