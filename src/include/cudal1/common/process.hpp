// Child processes in their own process group, with a request and a reply pipe, output sent to a
// log file, and the means to watch, limit and kill everything they start (every descendant,
// also those that left the process group).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cudal1 {

// Kernel limits set in the child before it starts its program; inherited by all it starts.
struct ProcessLimits {
  std::optional<std::uint64_t> file_bytes;   // RLIMIT_FSIZE: the largest file it writes (logs too)
  std::optional<std::uint64_t> tasks;        // RLIMIT_NPROC: processes and threads of its user
  std::optional<std::uint64_t> cpu_seconds;  // RLIMIT_CPU: CPU time of each of its processes
  bool core_dumps = true;                    // false: RLIMIT_CORE 0
};

struct ProcessSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> environment;  // added to (or replacing) the parent's
  bool inherit_environment = true;                 // false: `environment` is all it gets
  ProcessLimits limits;
  std::filesystem::path log_file;     // stdout and stderr; /dev/null when empty
  std::filesystem::path stdout_file;  // when set, stdout goes here instead
  std::filesystem::path stdin_file;   // when set, the child reads this; else /dev/null
  bool control_pipes = false;         // requests on the child's fd 3, replies from its fd 4
  // Instead: one SOCK_SEQPACKET socket on the child's fd 3 (request_fd() == reply_fd()).
  bool control_socket = false;
  int nice = 0;  // added to the child's nice value (lower CPU priority when > 0)
  std::filesystem::path working_directory;  // the parent's when empty
  // A cgroup's cgroup.procs: the child joins it before it starts its program, so that all it
  // starts is in the group (cudal1/common/cgroup.hpp). The start fails if it cannot.
  std::filesystem::path cgroup_procs;
  // An open descriptor the child gets as its fd 3 (instead of control pipes or socket).
  int fd3 = -1;
  // The child is not tied to this process: no parent-death signal, and it is reparented at once
  // (a double fork); spawn() then returns a process that has already ended.
  bool detached = false;
};

struct ExitStatus {
  bool signaled = false;
  int code = 0;                  // exit code when !signaled
  int signal = 0;                // terminating signal when signaled
  std::string describe() const;  // "exit code 3", "signal 11 (Segmentation fault)"
};

class ChildProcess {
 public:
  // Starts the process; throws std::system_error when it cannot be started.
  static std::unique_ptr<ChildProcess> spawn(const ProcessSpec& spec);
  // A process another one started and reaps (a zygote's fork: cudal1/eval/worker_forks.hpp),
  // watched and killed as a child is. `ended` says how it ended once its parent has reaped it;
  // `gone` runs when this object is destroyed, after the process is.
  static std::unique_ptr<ChildProcess> adopt(pid_t pid, int request_fd, int reply_fd,
                                             std::function<std::optional<ExitStatus>()> ended,
                                             std::function<void()> gone);
  ~ChildProcess();  // kills the group if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  int request_fd() const { return request_fd_; }  // parent writes
  int reply_fd() const { return reply_fd_; }      // parent reads
  void close_request_fd();

  // Reaps the child if it has exited.
  std::optional<ExitStatus> poll_exit();
  // Waits up to `seconds` for the child to exit; on time-out kills the group and returns nullopt.
  std::optional<ExitStatus> wait_or_kill(double seconds);
  // SIGKILL to the child and every descendant (the candidate's own children included, also
  // those in sessions of their own), then reaps.
  ExitStatus kill_group();
  // SIGSTOP (false) or SIGCONT (true) to the child and every descendant, while it runs.
  void set_group_running(bool running);
  // What the child and all its descendants use, in one walk of /proc.
  struct Usage {
    std::uint64_t resident_bytes = 0;  // of the live processes
    // User and system time, of the ended ones too where a live one of them reaped them.
    double cpu_seconds = 0;
  };
  Usage group_usage() const;

 private:
  ChildProcess() = default;
  void stop_tree() const;
  pid_t pid_ = -1;
  int request_fd_ = -1;
  int reply_fd_ = -1;
  std::optional<ExitStatus> exit_;
  std::function<std::optional<ExitStatus>()> ended_;  // adopted: its parent's report
  std::function<void()> gone_;
};

// The process in `root`'s tree (itself included) whose pid in its own, innermost PID namespace is
// `namespace_pid`, and whose parent is `parent` (any when 0); nullopt when there is none.
std::optional<pid_t> find_in_tree(pid_t root, pid_t namespace_pid, pid_t parent = 0);

// Runs a command to completion and returns its stdout (stderr goes to `log_file` or /dev/null);
// throws std::runtime_error on a non-zero exit or when `timeout_seconds` passes.
std::string run_and_capture(const ProcessSpec& spec, double timeout_seconds);

// This machine's name (gethostname), "unknown" when it cannot be read.
std::string host_name();

}  // namespace cudal1
