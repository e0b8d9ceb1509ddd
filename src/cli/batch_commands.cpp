// cudal1 prompts export / cudal1 responses import: optimisation runs in rounds, and generations
// over a suite, through OpenAI Batch API files, with no live LLM.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/llm/batch.hpp"
#include "cudal1/search/optimize_settings.hpp"
#include "cudal1/store/store.hpp"
#include "guarded_command.hpp"
#include "option_domains.hpp"
#include "store_option.hpp"

namespace cudal1::cli {
namespace {

struct BatchArguments {
  std::string db = "cudal1.db";
  std::string file;
  std::optional<std::int64_t> run;
  bool all = false;  // every run's prompts (a generation has one run per task)
};

// What --db must name: the runs' prompts and replies are there.
constexpr const char* kBatchStore = "of the runs started with --llm batch";

store::RunRecord pick_run(store::Store& store, const BatchArguments& args) {
  const auto run = args.run ? store.run(*args.run) : store.latest_run();
  if (!run) {
    throw InputError(
        args.run ? fmt::format("run {} is not in {}", *args.run, args.db)
                 : fmt::format("{} holds no run yet: start one with cudal1 optimize --llm batch",
                               args.db));
  }
  return *run;
}

int export_prompts(const BatchArguments& args) {
  return guarded("cudal1 prompts export", [&] {
    store::Store store = open_existing_store(args.db, kBatchStore);
    if (args.all && args.run) throw InputError("--all and --run exclude each other");
    const std::vector<store::RunRecord> runs =
        args.all ? store.runs() : std::vector<store::RunRecord>{pick_run(store, args)};
    std::string lines;
    int count = 0, with_prompts = 0;
    for (const auto& run : runs) {
      int before = count;
      for (const auto& prompt : store.prompts(run.id)) {
        if (prompt.state != "pending") continue;
        lines += llm::batch_request_line(prompt.custom_id,
                                         llm::ChatRequest::from_openai_body(prompt.request))
                     .dump() +
                 "\n";
        ++count;
      }
      with_prompts += count > before;
    }
    write_file_atomic(args.file, lines);
    const std::string source =
        args.all ? fmt::format("{} runs", with_prompts) : fmt::format("run {}", runs.front().id);
    std::cerr << fmt::format("cudal1 prompts export: {} prompts of {} written to {}", count, source,
                             args.file)
              << std::endl;
    return kExitOk;
  });
}

int import_responses(const BatchArguments& args) {
  return guarded("cudal1 responses import", [&] {
    const std::string text = read_source_file(args.file, "results");
    store::Store store = open_existing_store(args.db, kBatchStore);
    int imported = 0, already = 0, failed = 0, unknown = 0, line_number = 0;
    std::set<std::string> stages;  // of the runs the replies belong to: which command continues
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto json = nlohmann::json::parse(line, nullptr, false);
      if (json.is_discarded() || !json.is_object()) {
        throw InputError(fmt::format("{} line {} is not a JSON object", args.file, line_number));
      }
      llm::BatchResult result;
      try {
        result = llm::parse_batch_result_line(json);
      } catch (const std::exception& e) {
        throw InputError(fmt::format("{} line {}: {}", args.file, line_number, e.what()));
      }
      const auto prompt = store.prompt_by_custom_id(result.custom_id);
      if (!prompt) {
        ++unknown;
        continue;
      }
      if (const auto run = store.run(prompt->run_id))
        stages.insert(search::stage_of_run(run->options, run->llm));
      if (!result.ok) {
        if (prompt->state == "pending") store.mark_prompt_failed(prompt->id, result.error);
        ++failed;
        continue;
      }
      store::ResponseRecord response;
      response.prompt_id = prompt->id;
      response.raw = result.response.raw;
      response.content = result.response.content;
      response.finish_reason = result.response.finish_reason;
      response.prompt_tokens = result.response.usage.prompt_tokens;
      response.completion_tokens = result.response.usage.completion_tokens;
      response.received_at = store::now_iso8601();
      (store.record_response(response) ? imported : already) += 1;
    }
    std::string next;
    for (const auto& stage :
         stages.empty() ? std::set<std::string>{search::kStageOptimize} : stages)
      next +=
          fmt::format("{}cudal1 {} --db {} --resume", next.empty() ? "" : " and ", stage, args.db);
    std::cerr << fmt::format(
                     "cudal1 responses import: {} imported, {} already present, {} failed, {} with "
                     "an unknown custom_id; continue with: {}",
                     imported, already, failed, unknown, next)
              << std::endl;
    return kExitOk;
  });
}

}  // namespace

Command add_prompts_command(CLI::App& app) {
  auto a = std::make_shared<BatchArguments>();
  CLI::App* prompts = app.add_subcommand("prompts", "Prompts of an optimisation run");
  prompts->require_subcommand(1);
  CLI::App* exp = prompts->add_subcommand(
      "export", "Write the run's unanswered prompts as OpenAI Batch API lines");
  exp->add_option("--db", a->db, "the store")->check(CLI::ExistingFile)->capture_default_str();
  exp->add_option("--out", a->file, "JSONL file to write")->check(output_file())->required();
  exp->add_option("--run", a->run, "run id (default: the latest)")->check(whole_number(1));
  exp->add_flag("--all", a->all,
                "the unanswered prompts of every run (the runs of cudal1 generate: one per task)");
  return [a] { return export_prompts(*a); };
}

Command add_responses_command(CLI::App& app) {
  auto a = std::make_shared<BatchArguments>();
  CLI::App* responses = app.add_subcommand("responses", "Replies of an optimisation run");
  responses->require_subcommand(1);
  CLI::App* imp =
      responses->add_subcommand("import", "Read OpenAI Batch API output lines into the store");
  imp->add_option("--db", a->db, "the store")->check(CLI::ExistingFile)->capture_default_str();
  imp->add_option("results", a->file, "JSONL file of batch output lines")->required();
  return [a] { return import_responses(*a); };
}

}  // namespace cudal1::cli
