#include "run_options.hpp"

#include <fmt/format.h>

#include "cudal1/common/error.hpp"
#include "cudal1/search/exemplar_sampler.hpp"
#include "option_domains.hpp"

namespace cudal1::cli {

void add_llm_options(CLI::App& command, LlmArguments& args) {
  command.add_option("--llm", args.llm,
                     "OpenAI-compatible base URL (http://host:8000/v1), cmd:COMMAND (prompt on "
                     "stdin, reply on stdout), or batch (export prompts, import replies)");
  command.add_option("--concurrency", args.concurrency, "LLM requests in flight at once")
      ->check(whole_number(1))
      ->capture_default_str();
  command.add_option("--request-timeout", args.request_timeout, "seconds for one LLM request")
      ->check(seconds())
      ->capture_default_str();
  command
      .add_option("--max-retries", args.max_retries,
                  "retries of a failed request (429, 5xx, time-outs); 0: none")
      ->check(whole_number(0))
      ->capture_default_str();
}

std::unique_ptr<llm::LlmClient> make_llm_client(const std::string& spec, const LlmArguments& args) {
  if (spec == "batch") return nullptr;
  llm::ClientOptions options;
  options.concurrency = args.concurrency;
  options.request_timeout_s = args.request_timeout;
  options.max_retries = args.max_retries;
  try {
    return llm::make_client(spec, options);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("--llm: {}", e.what()));
  }
}

void add_prompt_options(CLI::App& command, std::size_t& exemplars, std::string& sampler,
                        int& show_failures, std::string& prompt_profile) {
  command
      .add_option("--exemplars", exemplars,
                  "earlier implementations shown per prompt (0: the task's code alone)")
      ->check(whole_number(0))
      ->capture_default_str();
  // The sampler's own factory knows the names.
  const CLI::Validator known_sampler(
      [](std::string& name) -> std::string {
        try {
          search::make_sampler(name);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "bucket|random|islands");
  command.add_option("--sampler", sampler, "exemplar sampler: bucket, random or islands")
      ->check(known_sampler)
      ->capture_default_str();
  command
      .add_option("--show-failures", show_failures,
                  "recent failed attempts shown per prompt (0: none)")
      ->check(whole_number(0))
      ->capture_default_str();
  command
      .add_option("--prompt-profile", prompt_profile,
                  "what each exemplar's measurements say in the prompt: none, summary (time, "
                  "bandwidth and arithmetic against the measured peaks, diagnosis) or full (and "
                  "its top kernels)")
      ->check(CLI::IsMember({"none", "summary", "full"}))
      ->capture_default_str();
}

EvaluatorSettings evaluator_settings(const EvaluationArguments& args, const std::string& command,
                                     const std::filesystem::path& db) {
  EvaluatorSettings where = evaluator_settings(args);
  where.submitter = stable_submitter(command, db);
  return where;
}

nlohmann::json evaluation_record(const EvaluationArguments& args) {
  return {{"device", args.device},
          {"tolerance", args.tolerance},
          {"time_budget", args.time_budget},
          {"trials", args.trials},
          {"timing_mode", args.timing.mode},
          {"timing_rounds", args.timing.rounds},
          {"calibration", args.timing.calibration},
          {"timing_streams", args.timing.streams},
          {"cuda_connections", args.timing.cuda_connections}};
}

void inherit_evaluation_options(const CLI::App& command, const nlohmann::json& recorded,
                                EvaluationArguments& args) {
  if (!recorded.is_object()) return;
  const auto inherit = [&](const char* option, const char* key, auto& value) {
    if (command.count(option) > 0) return;
    const auto it = recorded.find(key);
    if (it == recorded.end() || it->is_null()) return;
    try {
      value = it->get<std::remove_reference_t<decltype(value)>>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(
          fmt::format("--resume: the run's recorded {} is not usable: {}", key, it->dump()));
    }
  };
  inherit("--device", "device", args.device);
  inherit("--tolerance", "tolerance", args.tolerance);
  inherit("--time-budget", "time_budget", args.time_budget);
  inherit("--trials", "trials", args.trials);
  inherit("--timing-mode", "timing_mode", args.timing.mode);
  // Runs recorded before "auto" stored a count.
  if (command.count("--timing-rounds") == 0 && recorded.contains("timing_rounds")) {
    const auto& rounds = recorded["timing_rounds"];
    if (rounds.is_number_unsigned() && rounds.get<std::size_t>() >= 1) {
      args.timing.rounds = std::to_string(rounds.get<std::size_t>());
    } else {
      inherit("--timing-rounds", "timing_rounds", args.timing.rounds);
    }
  }
  inherit("--calibration", "calibration", args.timing.calibration);
  inherit("--timing-streams", "timing_streams", args.timing.streams);
  inherit("--cuda-connections", "cuda_connections", args.timing.cuda_connections);
}

}  // namespace cudal1::cli
