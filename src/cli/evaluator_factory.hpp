// Which evaluator a command uses: this machine's engine, or (--queue redis://...) the workers of a
// Redis queue. eval, bench, optimize and serve all take it from here, with the same option.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "cudal1/eval/evaluator.hpp"

namespace cudal1::cli {

struct EvaluatorSettings {
  // --queue: redis://[:PASSWORD@]HOST:PORT[/DB]; empty: the local engine.
  std::string queue;
  // The local engine; with a queue, its worker program still checks sources statically here and
  // build_jobs bounds those checks.
  EngineConfig engine;
  // With a queue: this submitter's name, which must stay the same when the command is run again
  // on the same work (bench's --out, optimize's --db), so that a restarted submitter collects the
  // verdicts published while it was away. Empty: a fresh name.
  std::string submitter;
  // --sandbox: auto, on or off (cudal1/eval/worker_sandbox.hpp).
  std::string sandbox = "auto";
  // --warm-workers: on or off (cudal1/eval/worker_forks.hpp).
  std::string warm_workers = "on";
  // --ready-workers: auto or a count (cudal1/eval/ready_workers.hpp).
  std::string ready_workers = "auto";
  // --keep-references: on, off or a count per GPU (cudal1/eval/reference_pool.hpp).
  std::string keep_references = "on";
  // --task-references: reference workers per task and GPU at once; 0: no limit.
  std::size_t task_references = 0;
};

// Throws InputError for an unusable --queue (its URL, or this build has no Redis support).
std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSettings& settings);

// A submitter name for `command` working on `work` (bench's --out, optimize's --db): the same
// on every run of it on this host.
std::string stable_submitter(const std::string& command, const std::filesystem::path& work);

// Registers --queue on a command.
void add_queue_option(CLI::App& command, std::string& queue);

// Registers --sandbox on a command that evaluates (here, or as a queue's worker).
void add_sandbox_option(CLI::App& command, std::string& policy);

// Registers --warm-workers on a command that evaluates.
void add_warm_workers_option(CLI::App& command, std::string& choice);

// Registers --ready-workers on a command that evaluates.
void add_ready_workers_option(CLI::App& command, std::string& choice);
// --ready-workers's value as EngineConfig::ready_workers has it (auto: -1).
int parse_ready_workers(const std::string& choice);

// Registers --keep-references on a command that evaluates.
void add_keep_references_option(CLI::App& command, std::string& choice);
// The most kept references per GPU --keep-references N takes (each an idle process with its CUDA
// context and the task's model).
inline constexpr std::size_t kMaxKeptPerGpu = 256;
// --keep-references's value into `engine` (on, off or a count per GPU); InputError otherwise.
void apply_keep_references(const std::string& choice, EngineConfig& engine);

// Registers --task-references on a command that evaluates.
void add_task_references_option(CLI::App& command, std::size_t& count);
// --task-references's value into `engine`, after apply_keep_references; InputError where the
// references are not kept (it limits nothing then).
void apply_task_references(std::size_t count, EngineConfig& engine);

}  // namespace cudal1::cli
