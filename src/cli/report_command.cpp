// cudal1 report: one self-contained HTML page of a bench output or an optimize run directory,
// or the training view of a store (--db: the rewards cudal1 serve gave a trainer).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <tuple>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/report/html_report.hpp"
#include "cudal1/report/run_directory.hpp"
#include "option_domains.hpp"
#ifdef CUDAL1_WITH_OPTIMIZER
#include "cudal1/data/training_log.hpp"
#include "store_option.hpp"
#endif

namespace cudal1::cli {
namespace {

struct ReportArguments {
  std::string dir;
  std::string db;
  std::string html;
  std::string title;
  std::string suite;
  std::vector<std::string> js_dirs;
  std::string chart_js;
  std::string highlight_js;
  std::string highlight_css;
  bool require_assets = false;
};

report::AssetOptions asset_options(const ReportArguments& args) {
  report::AssetOptions options;
  for (const auto& dir : args.js_dirs) options.search_dirs.emplace_back(dir);
  if (!args.chart_js.empty()) options.chart_js = args.chart_js;
  if (!args.highlight_js.empty()) options.highlight_js = args.highlight_js;
  if (!args.highlight_css.empty()) options.highlight_css = args.highlight_css;
  return options;
}

// The training view of a store, and what the closing line calls it.
std::pair<std::string, std::string> training_page(const ReportArguments& args,
                                                  const report::ReportAssets& assets,
                                                  const report::ReportOptions& options) {
#ifdef CUDAL1_WITH_OPTIMIZER
  store::Store store = open_existing_store(args.db, "cudal1 serve kept the rewards in");
  const auto run = report::summarize_training(data::reward_events(store), args.db);
  return {
      report::render_training_report(run, assets, options),
      fmt::format("training report of {} rewards over {} steps", run.rewards, run.steps.size())};
#else
  (void)assets, (void)options;
  throw InputError(fmt::format(
      "--db {}: this cudal1 was built without the store (SQLite headers were missing); write the "
      "report on a machine that has it",
      args.db));
#endif
}

int run_report(const ReportArguments& args) {
  try {
    if (args.dir.empty() == args.db.empty()) {
      throw InputError(
          "name a result directory (cudal1 bench or optimize output) or --db STORE (the "
          "training view), not both");
    }
    const report::ReportAssets assets = report::load_report_assets(asset_options(args));
    const auto missing = assets.missing();
    for (const auto& line : missing) std::cerr << "cudal1 report: missing " << line << '\n';
    if (args.require_assets && !missing.empty()) {
      throw InputError(
          "--require-assets: the libraries above are needed for charts and "
          "highlighting (sudo apt-get install libjs-chart.js libjs-highlight.js)");
    }
    report::ReportOptions options;
    options.title = args.title;
    std::string html;
    std::string what;
    if (!args.db.empty()) {
      std::tie(html, what) = training_page(args, assets, options);
    } else if (report::detect_run_kind(args.dir) == report::RunKind::kBench) {
      const auto run = report::load_bench_run(
          args.dir,
          args.suite.empty() ? std::nullopt : std::optional<std::filesystem::path>(args.suite));
      html = report::render_bench_report(run, assets, options);
      what = fmt::format("bench report of {} tasks", run.tasks.size());
    } else {
      const auto run = report::load_optimize_run(args.dir);
      html = report::render_optimize_report(run, assets, options);
      what = fmt::format("optimize report of {} candidates", run.candidates.size());
    }
    try {
      write_file_atomic(args.html, html);
    } catch (const std::exception& e) {
      throw InputError(fmt::format("--html {}: cannot write the report: {}", args.html, e.what()));
    }
    std::cerr << fmt::format("cudal1 report: wrote the {} to {} ({} KiB)\n", what, args.html,
                             (html.size() + 1023) / 1024);
    if (!missing.empty()) std::cerr << "cudal1 report: the page says what is missing\n";
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 report: " << e.what() << std::endl;
    return kExitBadInput;
#ifdef CUDAL1_WITH_OPTIMIZER
  } catch (const store::StoreError& e) {
    std::cerr << "cudal1 report: " << e.what() << std::endl;
    return kExitBadInput;
#endif
  } catch (const std::exception& e) {
    std::cerr << "cudal1 report: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArguments>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page of a bench or optimize output directory, or of a "
      "store's training (--db)");
  cmd->add_option("dir", a->dir, "output directory of cudal1 bench or cudal1 optimize");
  cmd->add_option("--db", a->db,
                  "instead of a directory: the store of cudal1 serve, for the training view "
                  "(rewards per step, rejected completions, best speedup per task)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--html", a->html, "the HTML file to write")->check(output_file())->required();
  cmd->add_option("--title", a->title, "page title (default: from the directory)");
  cmd->add_option("--suite", a->suite,
                  "bench reports: the suite folder (level1/, level2/, ...) when the task files "
                  "are no longer where results.jsonl says");
  cmd->add_option("--js-dir", a->js_dirs,
                  "folder holding chart.js/ and highlight.js/ (repeatable; default $CUDAL1_JS_DIR, "
                  "/usr/share/javascript, /usr/share/nodejs)");
  cmd->add_option("--chart-js", a->chart_js, "Chart.js file to inline (UMD build)");
  cmd->add_option("--highlight-js", a->highlight_js, "highlight.js file to inline");
  cmd->add_option("--highlight-css", a->highlight_css, "highlight.js style sheet to inline");
  cmd->add_flag("--require-assets", a->require_assets,
                "fail (exit 2) instead of writing a page without charts or highlighting");
  return [a] { return run_report(*a); };
}

}  // namespace cudal1::cli
