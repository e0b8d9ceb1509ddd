#include "cudal1/eval/worker_client.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <future>
#include <mutex>
#include <system_error>
#include <vector>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/proc_tree.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {
namespace {

namespace proto = worker_protocol;

// How often a waiting orchestrator looks at the worker's memory: often enough to stop a runaway
// allocation before it takes the machine down, rarely enough to cost nothing measurable.
constexpr auto kMemoryCheckInterval = std::chrono::milliseconds(100);
// Grace for a worker asked to exit before it is killed.
constexpr double kExitGraceSeconds = 2.0;
// The longest an idle worker may take to answer cpu_report at its shutdown.
constexpr auto kCpuReportWait = std::chrono::seconds(1);

void ignore_sigpipe_once() {
  static std::once_flag once;
  // A worker that dies mid-request must surface as an error on write, not kill the orchestrator.
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
}

}  // namespace

std::unique_ptr<WorkerClient> WorkerClient::start(const WorkerSpec& spec) {
  ignore_sigpipe_once();
  auto client = std::unique_ptr<WorkerClient>(new WorkerClient(spec));
  // A reply carries outputs the worker held in its own memory: nothing larger can be honest.
  if (spec.memory_limit_bytes > 0) client->reader_.set_max_payload(spec.memory_limit_bytes);
  if (spec.forked) {
    nlohmann::json request = spec.forked->request;
    // Set by the fork itself before its first request, once it leads a session of its own:
    // what it starts (a build's compilers) inherits the priority, and so does its autogroup.
    if (spec.nice > 0) request[proto::fork::kNice] = spec.nice;
    client->process_ =
        spec.forked->zygote->spawn(std::move(request), spec.log_file, spec.cgroup.get());
    return client;
  }
  ProcessSpec process;
  process.argv = spec.argv.empty()
                     ? std::vector<std::string>{spec.program.string(), proto::mode::kServe}
                     : spec.argv;
  process.environment = spec.environment;
  process.inherit_environment = spec.inherit_environment;
  process.limits = spec.limits;
  process.working_directory = spec.working_directory;
  if (spec.cgroup) process.cgroup_procs = spec.cgroup->procs_file();
  process.log_file = spec.log_file;
  process.control_pipes = true;
  process.nice = spec.nice;
  client->process_ = ChildProcess::spawn(process);
  return client;
}

void WorkerClient::assign(std::string name, std::filesystem::path log_file,
                          std::shared_ptr<WorkerCpuLedger> cpu_ledger) {
  spec_.name = std::move(name);
  spec_.log_file = std::move(log_file);
  spec_.cpu_ledger = std::move(cpu_ledger);
}

bool WorkerClient::alive() {
  return process_ && !failed_ && !process_->poll_exit();
}

bool WorkerClient::idle() {
  return replies_owed_ == 0 && alive();
}

void WorkerClient::kill() {
  if (!process_) return;
  // Signals only: the thread in receive() reaps it and keeps the process's state.
  const pid_t pid = process_->pid();
  for (const auto& process : process_tree(pid)) ::kill(process.pid, SIGKILL);
  ::kill(-pid, SIGKILL);
}

WorkerClient::~WorkerClient() {
  if (process_) process_->kill_group();
}

void WorkerClient::fail_crashed() {
  const std::string exit = describe_exit();
  if (spec_.cgroup && spec_.cgroup->oom_kills() > 0) fail_out_of_memory();
  fail(WorkerFailure::Kind::kCrashed, "the worker process died (" + exit + ")");
}

void WorkerClient::fail_out_of_memory() {
  fail(WorkerFailure::Kind::kMemoryLimit,
       fmt::format("memory limit exceeded: the kernel ended a process of the worker at its "
                   "cgroup's limit of {:.2f} GiB",
                   spec_.memory_limit_bytes / 1073741824.0));
}

std::string WorkerClient::describe_exit() {
  auto status = process_->wait_or_kill(kExitGraceSeconds);
  if (!status) return "no exit status";
  // bubblewrap exits with 128 + N for a worker that signal N ended.
  if (spec_.sandboxed && !status->signaled && status->code > 128 && status->code < 128 + 65) {
    status->signaled = true;
    status->signal = status->code - 128;
  }
  return status->describe();
}

void WorkerClient::fail(WorkerFailure::Kind kind, const std::string& message) {
  failed_ = true;
  process_->kill_group();
  throw WorkerFailure(kind, spec_.name, message);
}

void WorkerClient::send(const nlohmann::json& request) {
  try {
    wire::write_message(process_->request_fd(), {request, {}});
    ++replies_owed_;
  } catch (const std::system_error&) {
    fail_crashed();
  }
}

wire::Message WorkerClient::receive(Clock::time_point deadline) {
  auto next_memory_check = Clock::now();
  for (;;) {
    try {
      if (auto message = reader_.next()) {
        --replies_owed_;
        return std::move(*message);
      }
    } catch (const std::exception& e) {
      fail(WorkerFailure::Kind::kProtocol,
           std::string("the worker broke the protocol: ") + e.what());
    }
    const auto now = Clock::now();
    if (now >= deadline) fail(WorkerFailure::Kind::kTimeout, "time limit exceeded");
    if ((spec_.memory_limit_bytes > 0 || spec_.cpu_limit_seconds > 0) && now >= next_memory_check) {
      // Every process it started counts, also those in sessions of their own.
      const ChildProcess::Usage used = process_->group_usage();
      if (spec_.memory_limit_bytes > 0 && used.resident_bytes > spec_.memory_limit_bytes) {
        fail(WorkerFailure::Kind::kMemoryLimit,
             fmt::format("memory limit exceeded: {:.2f} GiB resident, limit {:.2f} GiB",
                         used.resident_bytes / 1073741824.0,
                         spec_.memory_limit_bytes / 1073741824.0));
      }
      if (spec_.cgroup && spec_.cgroup->oom_kills() > 0) fail_out_of_memory();
      if (spec_.cpu_limit_seconds > 0 && used.cpu_seconds > spec_.cpu_limit_seconds) {
        fail(WorkerFailure::Kind::kTimeout,
             fmt::format("CPU time limit exceeded: {:.0f} s of all its processes, limit {:.0f} s",
                         used.cpu_seconds, spec_.cpu_limit_seconds));
      }
      next_memory_check = now + kMemoryCheckInterval;
    }
    const auto wait = std::min<Clock::duration>(deadline - now, kMemoryCheckInterval);
    pollfd fd{process_->reply_fd(), POLLIN, 0};
    const int ready = ::poll(
        &fd, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
    if (ready < 0 && errno != EINTR) fail(WorkerFailure::Kind::kProtocol, "poll failed");
    if (ready <= 0) continue;
    const long n = reader_.read_from(process_->reply_fd());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_crashed();
  }
}

wire::Message WorkerClient::call(const nlohmann::json& request, Clock::time_point deadline) {
  send(request);
  wire::Message reply = receive(deadline);
  expect_ok(reply);
  return reply;
}

void WorkerClient::pause() {
  if (process_) process_->set_group_running(false);
}

void WorkerClient::resume() {
  if (process_) process_->set_group_running(true);
}

std::uint64_t WorkerClient::resident_bytes() const {
  return process_ ? process_->group_usage().resident_bytes : 0;
}

void WorkerClient::shutdown() {
  if (!process_ || process_->poll_exit()) return;
  process_->set_group_running(true);  // a paused worker must read its exit request
  if (spec_.cpu_ledger && !failed_ && replies_owed_ == 0) {
    // Idle and well: where its CPU went, one more round trip (given up after a second).
    try {
      const wire::Message reply =
          call({{proto::request::kOp, proto::op::kCpuReport}}, Clock::now() + kCpuReportWait);
      spec_.cpu_ledger->add(spec_.name, reply.header);
    } catch (const std::exception&) {
      if (failed_) return;  // killed for not answering
    }
  }
  try {
    wire::write_message(process_->request_fd(), {{{proto::request::kOp, proto::op::kExit}}, {}});
  } catch (const std::system_error&) {
  }
  process_->close_request_fd();
  process_->wait_or_kill(kExitGraceSeconds);
}

std::string WorkerClient::log_tail() const {
  return trim_log_file(spec_.log_file);
}

void expect_ok(const wire::Message& reply) {
  namespace key = proto::reply;
  if (reply.header.value(key::kOk, false)) return;
  throw WorkerError(reply.header.value(key::kStatus, proto::status::kRuntimeError),
                    reply.header.value(key::kError, "unknown error"),
                    reply.header.value(key::kTraceback, ""));
}

wire::Message call_as(WorkerClient& worker, Side side, const nlohmann::json& request,
                      Clock::time_point deadline) {
  try {
    return worker.call(request, deadline);
  } catch (const WorkerError& error) {
    throw SideFailure(side, error);
  }
}

std::pair<wire::Message, wire::Message> call_both(WorkerClient& candidate, WorkerClient& reference,
                                                  const nlohmann::json& request,
                                                  Clock::time_point deadline) {
  candidate.send(request);
  reference.send(request);
  auto receive_as = [deadline](WorkerClient& worker, Side side) {
    wire::Message reply = worker.receive(deadline);
    try {
      expect_ok(reply);
    } catch (const WorkerError& error) {
      throw SideFailure(side, error);
    }
    return reply;
  };
  auto expected =
      std::async(std::launch::async, [&] { return receive_as(reference, Side::kReference); });
  wire::Message got;
  try {
    got = receive_as(candidate, Side::kCandidate);
  } catch (...) {
    // Both ran the same request on the same inputs; the reference runs only the task's code.
    // Where it failed too, the task did (its get_inputs, its model), not the candidate: its
    // failure is the one that counts.
    expected.get();
    throw;
  }
  return {std::move(got), expected.get()};
}

void WorkerCpuLedger::add(const std::string& role, const nlohmann::json& report) {
  namespace rep = worker_protocol::reply;
  std::lock_guard lock(mutex_);
  auto& seconds = seconds_[role];
  ++workers_[role];
  if (const auto by_op = report.find(rep::kCpuByOp); by_op != report.end() && by_op->is_object()) {
    for (const auto& [op, value] : by_op->items())
      if (value.is_number()) seconds[op] += value.get<double>();
  }
  const std::pair<const char*, const char*> totals[] = {{rep::kCpuBetween, "between"},
                                                        {rep::kChildrenCpuS, "children"}};
  for (const auto& [key, name] : totals) {
    const auto value = report.find(key);
    if (value != report.end() && value->is_number()) seconds[name] += value->get<double>();
  }
}

nlohmann::json WorkerCpuLedger::to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [role, seconds] : seconds_) {
    nlohmann::json& entry = out[role];
    entry["workers"] = workers_.at(role);
    for (const auto& [key, value] : seconds) entry[key] = std::round(value * 1000) / 1000;
  }
  return out;
}

}  // namespace cudal1
