// cudal1 worker: evaluates the jobs of a Redis queue on this host's GPUs (or CPU) and publishes
// their verdicts (docs/scale-out.md).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <thread>

#include "commands.hpp"
#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/toolchain.hpp"
#include "cudal1/eval/worker_sandbox.hpp"
#include "cudal1/queue/queue_builds.hpp"
#include "cudal1/queue/queue_worker.hpp"
#include "cudal1/queue/redis_connection.hpp"
#include "evaluator_factory.hpp"
#include "interrupt.hpp"
#include "option_domains.hpp"

namespace cudal1::cli {
namespace {

struct WorkerArguments {
  std::string queue;
  std::string sandbox = "auto";
  std::string warm_workers = "on";
  std::string ready_workers = "auto";
  std::string keep_references = "on";
  std::size_t task_references = 0;
  std::string device = "auto";
  std::string role = "evaluate";
  std::string builds = "auto";
  std::string name;
  std::string cache_dir;
  unsigned jobs = 0;
  double visibility_timeout = 60;
  unsigned max_deliveries = 3;
};

// "gpu7-cuda0-cuda1": the host and its devices, stable across restarts, so that a restarted
// worker takes back what it held at once.
std::string default_name(const std::vector<std::string>& devices) {
  char host[256] = {};
  std::string name = ::gethostname(host, sizeof(host) - 1) == 0 ? host : "worker";
  for (const std::string& device : devices) {
    name += "-";
    for (char c : device) {
      if (c != ':') name += c;
    }
  }
  return name;
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

int run_worker(const WorkerArguments& args) {
  const std::atomic<bool>& stop = install_interrupt_handler();
  try {
    queue::WorkerSettings settings;
    settings.address = queue::parse_redis_url(args.queue);
    if (!args.cache_dir.empty()) settings.engine.cache_dir = args.cache_dir;
    settings.engine.sandbox = parse_sandbox_policy(args.sandbox);
    require_sandbox_if_on(settings.engine.sandbox);
    settings.engine.warm_workers = args.warm_workers != "off";
    settings.engine.ready_workers = parse_ready_workers(args.ready_workers);
    apply_keep_references(args.keep_references, settings.engine);
    apply_task_references(args.task_references, settings.engine);
    // The device list needs the worker's PyTorch: probed once, then reused from the cache.
    std::filesystem::create_directories(settings.engine.cache_dir);
    const Toolchain toolchain =
        Toolchain::load_or_probe(settings.engine.worker, settings.engine.cache_dir);
    settings.build_secret = queue::build_secret_from_environment();
    settings.build_role = args.role == "build";
    if (settings.build_role) {
      // It runs candidates' builds (their imports, constructors and compilers) for others:
      // only in the sandbox, whose paths every host shares, and signed.
      if (settings.engine.sandbox == SandboxPolicy::kOff || !SandboxSupport::probe().available())
        throw InputError(fmt::format(
            "--role build needs the sandbox ({}): builds for other hosts run candidates' code, "
            "and their folders must have the same paths as on the evaluating hosts",
            settings.engine.sandbox == SandboxPolicy::kOff
                ? "--sandbox off was given"
                : SandboxSupport::probe().why_unavailable));
      if (settings.build_secret.empty())
        throw InputError(fmt::format("--role build needs the fleet's build secret in ${}",
                                     queue::kBuildSecretVariable));
      settings.devices = {"build"};
    } else {
      settings.devices = resolve_devices(args.device, toolchain.cuda_available,
                                         args.device != "cpu" ? visible_gpu_count() : std::nullopt);
      settings.builds = queue::builds_mode_from(args.builds);
      if (settings.builds == queue::BuildsMode::kQueue && settings.build_secret.empty())
        throw InputError(fmt::format("--builds queue needs the fleet's build secret in ${}",
                                     queue::kBuildSecretVariable));
    }
    settings.name = args.name.empty() ? default_name(settings.devices) : args.name;
    settings.jobs = args.jobs > 0 ? args.jobs : usable_cores();
    settings.visibility_s = args.visibility_timeout;
    settings.max_deliveries = args.max_deliveries;
    auto output = std::make_shared<std::mutex>();
    settings.log = [name = settings.name, output](const std::string& line) {
      std::lock_guard<std::mutex> lock(*output);
      std::cerr << fmt::format("{} cudal1 worker {}: {}", timestamp(), name, line) << std::endl;
    };
    queue::QueueWorker worker(std::move(settings));
    try {
      worker.run(stop);
    } catch (const queue::RedisUnusable& e) {
      throw InputError(fmt::format("--queue: {}", e.what()));
    }
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 worker: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const queue::RedisStopped& e) {
    std::cerr << "cudal1 worker: stopped before Redis could be reached (" << e.what() << ")"
              << std::endl;
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 worker: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_worker_command(CLI::App& app) {
  auto args = std::make_shared<WorkerArguments>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Evaluate the jobs of a Redis queue on this host (see docs/scale-out.md)");
  cmd->add_option("--queue", args->queue,
                  "redis://[:PASSWORD@]HOST:PORT[/DB] (password also from "
                  "$CUDAL1_REDIS_PASSWORD)")
      ->required();
  cmd->add_option("--device", args->device,
                  "cuda (every visible GPU), cuda:N or a list cuda:0,cuda:1, cpu, or auto (cuda "
                  "when PyTorch sees a GPU)")
      ->capture_default_str();
  cmd->add_option("--role", args->role,
                  "evaluate: take evaluations; build: take the candidates' builds for the "
                  "evaluating workers of this host's build toolchain (a CPU host; needs the "
                  "sandbox and $CUDAL1_BUILD_SECRET)")
      ->check(CLI::IsMember({"evaluate", "build"}))
      ->capture_default_str();
  cmd->add_option("--builds", args->builds,
                  "where an evaluating worker's candidate builds are made: here, queue (by build "
                  "workers), or auto (by build workers while one is live and "
                  "$CUDAL1_BUILD_SECRET is set, here otherwise)")
      ->check(CLI::IsMember({"here", "queue", "auto"}))
      ->capture_default_str();
  cmd->add_option("--name", args->name,
                  "this worker's name in the consumer group (default: host and devices); two "
                  "live workers cannot share one");
  add_sandbox_option(*cmd, args->sandbox);
  add_warm_workers_option(*cmd, args->warm_workers);
  add_ready_workers_option(*cmd, args->ready_workers);
  add_keep_references_option(*cmd, args->keep_references);
  add_task_references_option(*cmd, args->task_references);
  cmd->add_option("--cache-dir", args->cache_dir,
                  "build cache and job files (default: $CUDAL1_CACHE_DIR or ~/.cache/cudal1)")
      ->check(output_folder());
  cmd->add_option("--jobs", args->jobs,
                  "jobs taken at once: built in parallel, timed one per GPU at a time (default: "
                  "one per core this process may use)")
      ->check(whole_number(1));
  cmd->add_option("--visibility-timeout", args->visibility_timeout,
                  "seconds after which a job of a worker that stopped beating is claimed by "
                  "another")
      ->check(seconds(1))
      ->capture_default_str();
  cmd->add_option("--max-deliveries", args->max_deliveries,
                  "a job delivered this many times without a result is failed as runtime_error")
      ->check(whole_number(1))
      ->capture_default_str();
  return [args] { return run_worker(*args); };
}

}  // namespace cudal1::cli
