// The orchestrator's side of one worker process: requests with deadlines, while watching the
// process for crashes and for memory use past its limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/wire.hpp"
#include "cudal1/eval/worker_forks.hpp"

namespace cudal1 {

using Clock = std::chrono::steady_clock;

// The worker produced no reply: it timed out, died, exceeded its memory or broke the protocol.
class WorkerFailure : public std::runtime_error {
 public:
  enum class Kind { kTimeout, kCrashed, kMemoryLimit, kProtocol };
  WorkerFailure(Kind kind, std::string worker, const std::string& message)
      : std::runtime_error(message), kind_(kind), worker_(std::move(worker)) {}
  Kind kind() const { return kind_; }
  const std::string& worker() const { return worker_; }  // WorkerSpec::name of the failed worker

 private:
  Kind kind_;
  std::string worker_;
};

// The worker replied that the request failed (a Python exception, a CUDA fault, ...).
class WorkerError : public std::runtime_error {
 public:
  WorkerError(std::string status, const std::string& message, std::string traceback)
      : std::runtime_error(message), status_(std::move(status)), traceback_(std::move(traceback)) {}
  const std::string& status() const { return status_; }  // "runtime_error", "compile_error", ...
  const std::string& traceback() const { return traceback_; }

 private:
  std::string status_;
  std::string traceback_;
};

// Where the CPU of an evaluation's workers went, summed by role ("reference", "candidate",
// "build") and operation: each worker's cpu_report, asked as it is shut down. Shared by the
// workers of one evaluation (their shutdowns may run on several threads).
class WorkerCpuLedger {
 public:
  void add(const std::string& role, const nlohmann::json& report);
  // {role: {workers, start, <op>..., between, children}}, seconds rounded to the millisecond.
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::map<std::string, double>> seconds_;
  std::map<std::string, int> workers_;
};

struct WorkerSpec {
  std::string name;  // "reference", "candidate", "build": says whose failure a WorkerFailure is
  std::filesystem::path program;
  std::map<std::string, std::string> environment;
  std::filesystem::path log_file;
  std::uint64_t memory_limit_bytes = 0;  // resident memory of all its processes; 0: none
  double cpu_limit_seconds = 0;          // CPU time of all its processes together; 0: none
  int nice = 0;                          // see ProcessSpec::nice
  // How it is contained (cudal1/eval/worker_sandbox.hpp): the whole command when not empty
  // (else `program serve`), `environment` as all it gets, its kernel limits.
  std::vector<std::string> argv;
  bool inherit_environment = true;
  ProcessLimits limits;
  std::filesystem::path working_directory;
  // Run under bubblewrap, whose exit code is 128 + N when the worker died of signal N.
  bool sandboxed = false;
  // The cgroup it runs in, where there is one: its memory.max is the memory limit the kernel
  // enforces (an OOM kill of any of its processes fails the worker); removed with the client.
  std::shared_ptr<CgroupScope> cgroup;
  // Forked from a warm zygote instead of started (argv unused); see worker_forks.hpp.
  std::shared_ptr<ForkedStart> forked;
  // Where the worker finds the task and the candidate (the paths its load request names).
  std::vector<std::filesystem::path> input_paths;
  // A forked build in a sandbox: where its output is (ContainedCommand::build_output).
  std::filesystem::path build_output;
  // Where its CPU report goes when it is shut down (none: not asked).
  std::shared_ptr<WorkerCpuLedger> cpu_ledger;
};

class WorkerClient {
 public:
  // Starts the process. PR_SET_PDEATHSIG ties it to the calling *thread*: start workers from a
  // thread that outlives them.
  static std::unique_ptr<WorkerClient> start(const WorkerSpec& spec);
  ~WorkerClient();

  void send(const nlohmann::json& request);
  // Waits for the next reply; throws WorkerFailure (the process is then killed).
  wire::Message receive(Clock::time_point deadline);
  // send + receive; throws WorkerError when the reply says ok=false.
  wire::Message call(const nlohmann::json& request, Clock::time_point deadline);
  // Asks the worker to exit, waits briefly, then kills its process group.
  void shutdown();
  // Stops every process of the worker's group (SIGSTOP) until resume(): a worker loaded ahead
  // of its turn can then do nothing, on the CPU or the device, while others are timed.
  void pause();
  void resume();
  // Resident memory of the worker's whole process group, as the memory limit counts it.
  std::uint64_t resident_bytes() const;

  // A ready worker (cudal1/eval/ready_workers.hpp) given to an evaluation: whose worker its
  // failures name, where its log now is, where its CPU report goes.
  void assign(std::string name, std::filesystem::path log_file,
              std::shared_ptr<WorkerCpuLedger> cpu_ledger);
  // Whether its process still runs (nothing asked of it).
  bool alive();
  // Alive, never failed, and no reply owed: it may be asked anything next (a reference worker
  // kept for another evaluation must be).
  bool idle();
  // Kills it at once; safe while another thread waits in receive() (which then fails).
  void kill();

  const std::filesystem::path& log_file() const { return spec_.log_file; }
  std::string log_tail() const;

 private:
  explicit WorkerClient(WorkerSpec spec) : spec_(std::move(spec)) {}
  [[noreturn]] void fail(WorkerFailure::Kind kind, const std::string& message);
  // The worker died: of its cgroup's memory limit (the kernel's OOM killer), or otherwise.
  [[noreturn]] void fail_crashed();
  [[noreturn]] void fail_out_of_memory();
  std::string describe_exit();

  WorkerSpec spec_;
  std::unique_ptr<ChildProcess> process_;
  wire::FrameReader reader_;
  int replies_owed_ = 0;  // requests sent whose reply was not read yet
  bool failed_ = false;   // fail() killed it
};

// Throws WorkerError if `reply` reports a failure.
void expect_ok(const wire::Message& reply);

enum class Side { kReference, kCandidate };

// A worker error, tagged with the side of the comparison whose worker reported it: a failing
// reference is a broken task, a failing candidate is the candidate's verdict.
class SideFailure : public std::runtime_error {
 public:
  SideFailure(Side side, const WorkerError& error)
      : std::runtime_error(error.what()), side_(side), error_(error) {}
  Side side() const { return side_; }
  const WorkerError& error() const { return error_; }

 private:
  Side side_;
  WorkerError error_;
};

// WorkerClient::call, with a WorkerError turned into a SideFailure for `side`.
wire::Message call_as(WorkerClient& worker, Side side, const nlohmann::json& request,
                      Clock::time_point deadline);

// The same request to both workers at once, both replies read at once (large replies drain
// through both pipes together): {candidate's reply, reference's}. A failure of the candidate's
// side is thrown before the reference's.
std::pair<wire::Message, wire::Message> call_both(WorkerClient& candidate, WorkerClient& reference,
                                                  const nlohmann::json& request,
                                                  Clock::time_point deadline);

}  // namespace cudal1
