// cudal1 data sft / cudal1 data rl: the datasets the training stages' trainers read, from the
// store (docs/rl.md, "The three training stages").
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/data/rl_prompt_set.hpp"
#include "cudal1/data/sft_dataset.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/prompt_service.hpp"
#include "cudal1/task/suite.hpp"
#include "guarded_command.hpp"
#include "option_domains.hpp"
#include "run_options.hpp"
#include "store_option.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {
namespace {

struct SftArguments {
  std::string db = "cudal1.db";
  std::string out;
  data::SftFilter filter;
  std::string levels;
};

struct RlArguments {
  std::string suite;
  std::string out;
  std::string db;
  int n = 1;
  std::uint64_t seed = 0;
  std::string levels;
  std::size_t limit = 0;
  std::string device = "cuda";
  std::string tolerance;
  std::string prompts;
  search::PromptSettings settings;
};

// One JSON object a line; text that is not valid UTF-8 (a reply can hold anything) is replaced,
// not an error.
std::string json_lines(const std::vector<nlohmann::json>& records) {
  std::string text;
  for (const auto& record : records)
    text += record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return text;
}

void write_output(const std::string& path, const std::vector<nlohmann::json>& records) {
  try {
    write_file_atomic(path, json_lines(records));
  } catch (const std::exception& e) {
    throw InputError(fmt::format("--out {}: cannot write: {}", path, e.what()));
  }
}

// What --db must name for the datasets.
constexpr const char* kDatasetStore = "cudal1 generate, optimize or serve wrote";

// What was written, then one line per reason replies were left out, with what changes it.
std::string sft_summary(const data::SftCounts& c, const SftArguments& args) {
  std::string text = fmt::format("cudal1 data sft: {} record{} written to {} (of {} replies",
                                 c.records, c.records == 1 ? "" : "s", args.out, c.replies);
  if (c.included_unreviewed > 0)
    text += fmt::format("; {} unreviewed, kept by --include-unreviewed", c.included_unreviewed);
  text += ")\n";
  std::size_t left = 0;
  for (const auto& [reason, count] : c.left_out) left += count;
  if (left == 0) return text;
  text += fmt::format("  left out {}:\n", left);
  for (const auto& reason : data::left_out_reasons()) {
    const std::size_t count = c.count(reason.name);
    if (count == 0) continue;
    std::string remedy(reason.remedy);
    if (const auto at = remedy.find("--db DB"); at != std::string::npos)
      remedy.replace(at, 7, "--db " + args.db);
    text += fmt::format("  {:>5} {:<18} {}{}\n", count, reason.name, reason.why,
                        remedy.empty() ? "" : "; " + remedy);
  }
  return text;
}

int export_sft(SftArguments args) {
  return guarded("cudal1 data sft", [&] {
    if (!args.levels.empty()) args.filter.levels = parse_levels(args.levels);
    store::Store store = open_existing_store(args.db, kDatasetStore);
    const data::SftDataset dataset = data::sft_dataset(store, args.filter);
    write_output(args.out, dataset.records);
    std::cerr << sft_summary(dataset.counts, args) << std::flush;
    return kExitOk;
  });
}

int export_rl(RlArguments args) {
  return guarded("cudal1 data rl", [&] {
    if (args.device != "cpu" && args.device != "cuda") {
      throw InputError(fmt::format(
          "--device '{}': name the kind of device whose measurements the prompts show, cpu or "
          "cuda",
          args.device));
    }
    const Suite suite =
        Suite::load(args.suite)
            .select(args.levels.empty() ? std::vector<int>{} : parse_levels(args.levels),
                    args.limit);
    // Without a store the prompts show the reference alone, as a fresh reward server does.
    store::Store store =
        args.db.empty() ? open_store(":memory:") : open_existing_store(args.db, kDatasetStore);
    args.settings.device_kind = args.device;
    args.settings.tolerance = Tolerance::parse(args.tolerance);
    const auto prompts_dir = args.prompts.empty() ? search::PromptLibrary::default_dir()
                                                  : std::filesystem::path(args.prompts);
    std::optional<search::PromptService> service;
    try {
      service.emplace(store, search::PromptLibrary::load(prompts_dir), args.settings);
    } catch (const std::exception& e) {
      throw InputError(e.what());
    }
    const auto records = data::rl_prompt_records(suite, *service, args.n, args.seed);
    write_output(args.out, records);
    std::cerr << fmt::format("cudal1 data rl: {} prompts for {} tasks written to {}",
                             records.size(), suite.tasks.size(), args.out)
              << std::endl;
    return kExitOk;
  });
}

}  // namespace

Command add_data_command(CLI::App& app) {
  auto sft = std::make_shared<SftArguments>();
  auto rl = std::make_shared<RlArguments>();
  CLI::App* data = app.add_subcommand("data", "Datasets for the training stages, from the store");
  data->require_subcommand(1);

  CLI::App* s = data->add_subcommand(
      "sft", "Verified replies as chat records {\"messages\": [system, user, assistant]}");
  s->add_option("--db", sft->db, "the store")->check(CLI::ExistingFile)->capture_default_str();
  s->add_option("--out", sft->out, "JSONL file to write")->check(output_file())->required();
  s->add_option("--stage", sft->filter.stage, "replies of generate runs, optimize runs, or all")
      ->check(CLI::IsMember({"generate", "optimize", "all"}))
      ->capture_default_str();
  s->add_option("--round", sft->filter.round, "only generate runs of this round")
      ->check(whole_number(0));
  s->add_option("--levels", sft->levels, "only tasks of these suite levels, e.g. 1,2");
  s->add_option("--min-speedup", sft->filter.min_speedup, "only replies at least this fast")
      ->check(non_negative_number());
  s->add_flag("--include-unreviewed", sft->filter.include_unreviewed,
              "also keep suspicious replies that were never reviewed (marked \"unreviewed\": "
              "true); `cudal1 review` reviews them instead");

  CLI::App* r = data->add_subcommand(
      "rl", "Contrastive prompts for every task of a suite, labelled with the task key");
  r->add_option("--suite", rl->suite, "suite directory in KernelBench layout")->required();
  r->add_option("--out", rl->out, "JSONL file to write")->check(output_file())->required();
  r->add_option("--db", rl->db,
                "the store whose verified candidates the prompts show (none: the reference only)")
      ->check(CLI::ExistingFile);
  r->add_option("--n", rl->n, "prompts per task")->check(whole_number(1))->capture_default_str();
  r->add_option("--seed", rl->seed, "exemplar sampling: prompt i of a task uses seed + i")
      ->check(whole_number(0))
      ->capture_default_str();
  r->add_option("--levels", rl->levels, "only these levels, e.g. 1,2");
  r->add_option("--limit", rl->limit, "only the first N selected tasks")->check(whole_number(1));
  r->add_option("--device", rl->device,
                "whose measurements the prompts show: cuda (GPU runs) or cpu")
      ->capture_default_str();
  add_tolerance_option(*r, rl->tolerance, "as the reward server's");
  add_prompt_options(*r, rl->settings.exemplars, rl->settings.sampler, rl->settings.show_failures,
                     rl->settings.prompt_profile);
  r->add_option("--prompts", rl->prompts,
                "directory of the prompt templates (system.md, contrastive.md)")
      ->check(CLI::ExistingDirectory);
  return [sft, rl, s] { return s->parsed() ? export_sft(*sft) : export_rl(*rl); };
}

}  // namespace cudal1::cli
