// cudal1 queue status: workers, jobs and throughput of a Redis queue.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/queue/queue_status.hpp"
#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::cli {
namespace {

// Status is asked for by people and scripts: an unreachable Redis is reported, not waited for.
constexpr double kConnectS = 10;

struct QueueArguments {
  std::string queue;
  bool json = false;
};

// An unreachable server or a refused password is the --queue option's problem (exit code 2).
nlohmann::json read_status(const std::string& url) {
  queue::ReconnectPolicy policy;
  policy.give_up_after_s = kConnectS;
  queue::RedisConnection redis(queue::parse_redis_url(url), policy);
  try {
    return queue::queue_status(redis);
  } catch (const queue::RedisUnusable& e) {
    throw InputError(fmt::format("--queue: {}", e.what()));
  }
}

int run_status(const QueueArguments& args) {
  try {
    const nlohmann::json status = read_status(args.queue);
    std::cout << (args.json ? status.dump(2) + "\n" : queue::format_status(status)) << std::flush;
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << "cudal1 queue status: " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "cudal1 queue status: internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace

Command add_queue_command(CLI::App& app) {
  auto args = std::make_shared<QueueArguments>();
  CLI::App* cmd = app.add_subcommand("queue", "Inspect a Redis evaluation queue");
  cmd->require_subcommand(1);
  CLI::App* status = cmd->add_subcommand(
      "status",
      "Workers (host, GPUs, current jobs, last heartbeat), jobs waiting, in flight and "
      "failed, results per minute");
  status->add_option("--queue", args->queue, "redis://[:PASSWORD@]HOST:PORT[/DB]")->required();
  status->add_flag("--json", args->json, "print the status as one JSON object");
  return [args] { return run_status(*args); };
}

}  // namespace cudal1::cli
