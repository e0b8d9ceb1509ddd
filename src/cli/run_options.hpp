// Options shared by the commands that prompt an LLM and evaluate its replies (optimize,
// generate): the LLM client, what a prompt shows (also data rl's and serve's prompts) and how each
// reply is evaluated.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cudal1/eval/evaluation.hpp"
#include "cudal1/llm/client.hpp"
#include "evaluation_options.hpp"
#include "evaluator_factory.hpp"

namespace cudal1::cli {

struct LlmArguments {
  std::string llm;  // URL, cmd:COMMAND or batch
  int concurrency = 8;
  double request_timeout = 600;
  int max_retries = 6;
};

// --llm, --concurrency, --request-timeout, --max-retries.
void add_llm_options(CLI::App& command, LlmArguments& args);

// The client for `spec` (--llm, or the one a run was started with); null for "batch". Throws
// InputError naming --llm for a spec that is not one.
std::unique_ptr<llm::LlmClient> make_llm_client(const std::string& spec, const LlmArguments& args);

// --exemplars, --sampler, --show-failures and --prompt-profile: what a contrastive prompt shows
// besides the task (optimize, data rl, serve).
void add_prompt_options(CLI::App& command, std::size_t& exemplars, std::string& sampler,
                        int& show_failures, std::string& prompt_profile);

// Where the evaluations run: --queue's workers (as submitter `command` of the store `db`, so
// a resumed command collects what was published meanwhile), else this machine's engine.
EvaluatorSettings evaluator_settings(const EvaluationArguments& args, const std::string& command,
                                     const std::filesystem::path& db);

// The evaluation options as a run records them (where the evaluations ran, --queue, is not
// part of them).
nlohmann::json evaluation_record(const EvaluationArguments& args);

// On --resume: every evaluation option that `command`'s line does not give is the one the run
// was started with (`recorded`, an evaluation_record; runs without one keep the defaults), so
// that one run's candidates are all evaluated alike.
void inherit_evaluation_options(const CLI::App& command, const nlohmann::json& recorded,
                                EvaluationArguments& args);

}  // namespace cudal1::cli
