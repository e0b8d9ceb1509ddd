// cudal1 serve: the reward service RL trainers train against (docs/rl.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/serve/reward_server.hpp"
#include "evaluation_options.hpp"
#include "evaluator_factory.hpp"
#include "interrupt.hpp"
#include "option_domains.hpp"
#include "review_options.hpp"
#include "run_options.hpp"
#include "store_option.hpp"
#include "timing_options.hpp"

namespace cudal1::cli {
namespace {

struct ServeArguments {
  std::string suite;
  std::string host = "127.0.0.1";
  int port = 8765;
  std::string port_file;
  std::string db = "cudal1.db";
  std::string work_dir = "cudal1-serve";
  std::string token;
  // Rewards.
  double reward_clip = rl::RewardPolicy{}.clip;
  std::size_t smoothing_window = rl::RewardPolicy{}.window;
  double reward_floor = rl::RewardPolicy{}.floor;
  std::string hacks;
  bool no_hack_cases = false;
  ReviewArguments review;  // the reward checker (its --hacks is the server's own)
  // Evaluation (time budget 3 s: docs/evaluation.md, "Defaults").
  EvaluationArguments evaluation;
  unsigned jobs = 0;
  std::size_t max_in_flight = 0;
  std::string start_order = "by-task";
  std::size_t task_affinity = serve::RewardServiceOptions{}.task_affinity;
  // Prompts.
  std::string prompts;
  std::size_t exemplars = 2;
  std::string sampler = "bucket";
  int show_failures = 1;
  std::string prompt_profile = "summary";
  // HTTP.
  std::size_t max_items = 4096;
  std::size_t max_body_mb = 64;
  std::size_t http_threads = 64;
  std::string openrlhf_logs = "text";
};

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

serve::ServerSettings server_settings(const ServeArguments& args) {
  serve::ServerSettings s;
  s.host = args.host;
  s.port = args.port;
  s.token = !args.token.empty() ? args.token : environment("CUDAL1_SERVE_TOKEN");
  if (!serve::is_loopback_host(s.host) && s.token.empty()) {
    throw InputError(
        fmt::format("--host {} accepts connections from other machines: pass --token T (or set "
                    "CUDAL1_SERVE_TOKEN) and have clients send 'Authorization: Bearer T'",
                    s.host));
  }
  s.max_items = args.max_items;
  s.max_body_bytes = args.max_body_mb << 20;
  s.threads = args.http_threads;
  s.text_logs = args.openrlhf_logs == "text";
  return s;
}

rl::RewardPolicy reward_policy(const ServeArguments& args) {
  rl::RewardPolicy policy;
  policy.clip = args.reward_clip;
  policy.window = args.smoothing_window;
  policy.floor = args.reward_floor;
  return policy;
}

EvalOptions eval_options(const ServeArguments& args) {
  EvalOptions eval = evaluation_options(args.evaluation);
  eval.device = EvalOptions().device;  // chosen per evaluation
  return eval;
}

// Where rejected completions become hack cases: --hacks, else cudal1-hacks/ beside the store,
// so that a server never writes into the shipped corpus of the source checkout.
std::filesystem::path serve_hacks_dir(const ServeArguments& args) {
  if (!args.hacks.empty()) return std::filesystem::absolute(args.hacks);
  return std::filesystem::absolute(args.db).parent_path() / "cudal1-hacks";
}

// The reward checker on the RL path, as in cudal1 optimize: suspicious verdicts (above
// --review-threshold, or above twice the task's best verified speedup) are reviewed by
// --review-llm with the most similar cases of the shipped corpus and of the server's own;
// without a reviewer they are flagged unreviewed.
std::shared_ptr<const review::RewardChecker> reward_checker(
    const ServeArguments& args, const std::filesystem::path& hacks_dir) {
  review::SuspicionPolicy policy;
  policy.threshold = args.review.threshold;
  std::vector<std::filesystem::path> corpora = {review::default_hacks_dir()};
  if (!hacks_dir.empty()) corpora.push_back(hacks_dir);
  return std::make_shared<const review::RewardChecker>(
      policy, std::move(corpora), make_reviewer(args.review), args.review.similar_cases);
}

// Stops the server at the first SIGINT/SIGTERM; requests in flight are still answered.
std::thread watch_for_interrupt(serve::RewardServer& server, const std::atomic<bool>& done) {
  return std::thread([&server, &done] {
    while (!done.load()) {
      if (interrupt_requested().load()) {
        std::cerr << "cudal1 serve: stopping: answering the requests in flight, then exiting "
                     "(a second signal ends it at once)"
                  << std::endl;
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

int run_serve(const ServeArguments& args) {
  install_interrupt_handler();
  try {
    if (args.suite.empty()) throw InputError("cudal1 serve needs --suite DIR (KernelBench layout)");
    const serve::ServerSettings settings = server_settings(args);
    // Before the engine probes PyTorch: a store that cannot be opened ends the command at once.
    store::Store store = open_store(args.db);
    serve::RewardServiceOptions options;
    options.policy = reward_policy(args);
    options.eval = eval_options(args);
    options.work_dir = std::filesystem::absolute(args.work_dir);
    if (!args.no_hack_cases) options.hacks_dir = serve_hacks_dir(args);
    options.reward_checker = reward_checker(args, options.hacks_dir);
    EvaluatorSettings engine = evaluator_settings(args.evaluation);
    engine.engine.build_jobs = args.jobs;
    // A restarted server on the same store collects the verdicts workers published meanwhile.
    engine.submitter = stable_submitter("serve", args.db);
    const std::unique_ptr<Evaluator> owned = make_evaluator(engine);
    Evaluator& evaluator = *owned;
    options.max_in_flight =
        args.max_in_flight > 0 ? args.max_in_flight : evaluator.config().max_in_flight;
    options.start_by_task = args.start_order == "by-task";
    options.task_affinity = args.task_affinity;
    const Toolchain& toolchain = evaluator.toolchain();
    const std::string& device = args.evaluation.device;
    options.devices = resolve_devices(device, toolchain.cuda_available,
                                      device != "cpu" ? visible_gpu_count() : std::nullopt);

    std::cerr << "cudal1 serve: checking the tasks of " << args.suite << " ..." << std::endl;
    const auto catalog =
        serve::TaskCatalog::load(args.suite, options.work_dir, store, evaluator.config().worker,
                                 evaluator.config().build_jobs);
    search::PromptSettings prompt_settings;
    prompt_settings.exemplars = args.exemplars;
    prompt_settings.sampler = args.sampler;
    prompt_settings.show_failures = args.show_failures;
    prompt_settings.prompt_profile = args.prompt_profile;
    prompt_settings.device_kind = device_kind(options.devices.front());
    prompt_settings.tolerance = options.eval.tolerance;
    const auto prompts_dir = args.prompts.empty() ? search::PromptLibrary::default_dir()
                                                  : std::filesystem::path(args.prompts);
    std::optional<search::PromptService> prompts;
    try {
      prompts.emplace(store, search::PromptLibrary::load(prompts_dir), prompt_settings);
    } catch (const std::exception& e) {
      throw InputError(e.what());
    }

    serve::Metrics metrics;
    serve::RewardService rewards(evaluator, store, catalog, options, metrics);
    serve::RewardServer server(rewards, *prompts, catalog, metrics, settings);
    const int port = server.bind();
    if (!args.port_file.empty()) std::ofstream(args.port_file) << port << "\n";
    std::cerr << fmt::format(
                     "cudal1 serve: listening on http://{}:{} | {} tasks of {} | devices {} | {} "
                     "evaluations at once | store {}{}",
                     settings.host, port, catalog.tasks().size(), catalog.root().string(),
                     fmt::join(options.devices, ","), options.max_in_flight, args.db,
                     settings.token.empty() ? "" : " | bearer token required")
              << std::endl;
    std::cerr << fmt::format(
                     "cudal1 serve: results above {:.2f}x or twice a task's best verified "
                     "speedup are {}; rejected completions {}",
                     args.review.threshold,
                     options.reward_checker->has_reviewer()
                         ? "reviewed by " + args.review.llm
                         : std::string("flagged unreviewed (no --review-llm)"),
                     options.hacks_dir.empty()
                         ? std::string("are not kept as hack cases")
                         : "become hack cases in " + options.hacks_dir.string())
              << std::endl;
    std::atomic<bool> done{false};
    std::thread watcher = watch_for_interrupt(server, done);
    server.serve();
    done = true;
    watcher.join();
    std::cerr << "cudal1 serve: stopped; every reward given is in " << args.db << std::endl;
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 serve: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 serve: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArguments>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve verified rewards and contrastive prompts to RL trainers over HTTP");
  cmd->add_option("--suite", args->suite,
                  "the tasks: a directory in KernelBench layout (level1/1_Name.py ...); a task "
                  "is named by its key, level1/1_Name")
      ->required();
  cmd->add_option("--host", args->host, "address to listen on; anything but loopback needs --token")
      ->capture_default_str();
  cmd->add_option("--port", args->port, "port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--port-file", args->port_file, "write the port listened on to this file")
      ->check(output_file());
  cmd->add_option("--db", args->db, "the SQLite store: every evaluation and reward is kept")
      ->check(output_file())
      ->capture_default_str();
  cmd->add_option("--work-dir", args->work_dir, "task copies and candidate files")
      ->check(output_folder())
      ->capture_default_str();
  cmd->add_option("--token", args->token,
                  "bearer token clients must send (or CUDAL1_SERVE_TOKEN, kept out of ps)");
  cmd->add_option("--reward-clip", args->reward_clip,
                  "smoothed rewards are z-scores clipped to [-C, C]")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--smoothing-window", args->smoothing_window,
                  "a task's last N raw rewards make the smoothing mean and deviation")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--reward-floor", args->reward_floor,
                  "raw reward of every failure and every rejected (hacking) completion")
      ->check(finite_number())
      ->capture_default_str();
  cmd->add_option("--hacks", args->hacks,
                  "hack-case database rejected completions are added to, and the reviewer "
                  "reads with the shipped one (default: cudal1-hacks/ beside --db)")
      ->check(output_folder());
  add_review_options(*cmd, args->review, false, false);
  cmd->add_flag("--no-hack-cases", args->no_hack_cases,
                "do not add rejected completions to the hack-case database");
  add_evaluation_options(*cmd, args->evaluation, kServeCommand);
  cmd->add_option("--jobs", args->jobs,
                  "candidate builds at once (default: one per core this process may use)")
      ->check(whole_number(1));
  cmd->add_option("--max-in-flight", args->max_in_flight,
                  "evaluations at once (default: twice --jobs)")
      ->check(whole_number(1));
  cmd->add_option("--start-order", args->start_order,
                  "which queued evaluation starts next: by-task (of the task with the fewest "
                  "running, so a GRPO group's later samples take the reference workers its "
                  "earlier ones kept) or arrival (the first queued)")
      ->check(CLI::IsMember({"by-task", "arrival"}))
      ->capture_default_str();
  cmd->add_option("--task-affinity", args->task_affinity,
                  "on several GPUs, an evaluation goes to the GPU where its task's evaluations "
                  "are (so it takes the reference workers they keep there) while that GPU has "
                  "at most N more in flight than the least busy; 0: always the least busy")
      ->check(CLI::Range(std::size_t{0}, std::size_t{4096}))
      ->capture_default_str();
  cmd->add_option("--prompts", args->prompts, "prompt templates (system.md, contrastive.md)")
      ->check(CLI::ExistingDirectory);
  add_prompt_options(*cmd, args->exemplars, args->sampler, args->show_failures,
                     args->prompt_profile);
  cmd->add_option("--max-items", args->max_items, "items per reward request at most")
      ->check(whole_number(1))
      ->capture_default_str();
  // Up to a tebibyte: the limit is kept in bytes, and no request body comes near it.
  cmd->add_option("--max-body-mb", args->max_body_mb, "request body size limit, in MiB")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--http-threads", args->http_threads, "requests answered at once")
      ->check(whole_number(2))
      ->capture_default_str();
  cmd->add_option("--openrlhf-logs", args->openrlhf_logs,
                  "extra_logs of /get_reward: text (status and flags included) or numeric")
      ->check(CLI::IsMember({"text", "numeric"}))
      ->capture_default_str();
  return [args] { return run_serve(*args); };
}

}  // namespace cudal1::cli
