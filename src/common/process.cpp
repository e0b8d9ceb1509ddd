#include "cudal1/common/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "cudal1/common/cpu_priority.hpp"
#include "cudal1/common/proc_tree.hpp"

extern char** environ;

namespace cudal1 {
namespace {

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

ExitStatus decode(int status) {
  ExitStatus out;
  if (WIFSIGNALED(status)) {
    out.signaled = true;
    out.signal = WTERMSIG(status);
  } else {
    out.code = WEXITSTATUS(status);
  }
  return out;
}

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides,
                                            bool inherit) {
  std::vector<std::string> out;
  for (char** e = environ; inherit && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos && overrides.count(entry.substr(0, eq))) continue;
    out.push_back(entry);
  }
  for (const auto& [key, value] : overrides) out.push_back(key + "=" + value);
  return out;
}

// Async-signal-safe: called between fork and exec.
void apply_limits(const ProcessLimits& limits) {
  const auto set = [](int resource, std::uint64_t value) {
    const rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
    ::setrlimit(resource, &limit);
  };
  if (limits.file_bytes) set(RLIMIT_FSIZE, *limits.file_bytes);
  if (limits.tasks) set(RLIMIT_NPROC, *limits.tasks);
  if (limits.cpu_seconds) set(RLIMIT_CPU, *limits.cpu_seconds);
  if (!limits.core_dumps) set(RLIMIT_CORE, 0);
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (!signaled) return fmt::format("exit code {}", code);
  const char* name = strsignal(signal);
  return fmt::format("signal {} ({})", signal, name ? name : "unknown");
}

std::unique_ptr<ChildProcess> ChildProcess::spawn(const ProcessSpec& spec) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = merged_environment(spec.environment, spec.inherit_environment);
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);
  const std::string log = spec.log_file.empty() ? "/dev/null" : spec.log_file.string();

  int to_child[2] = {-1, -1};
  int from_child[2] = {-1, -1};
  if (spec.control_socket) {
    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      throw_errno("socketpair");
    to_child[0] = pair[0];
    from_child[1] = ::fcntl(pair[0], F_DUPFD_CLOEXEC, 0);
    to_child[1] = pair[1];
    from_child[0] = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 0);
  } else if (spec.control_pipes) {
    if (pipe2(to_child, O_CLOEXEC) != 0) throw_errno("pipe");
    if (pipe2(from_child, O_CLOEXEC) != 0) throw_errno("pipe");
    // Replies carry tensors of tens of MB: a 1 MiB pipe moves them in about half the time of
    // the default 64 KiB one (fewer wake-ups). Best effort: the limit is fs.pipe-max-size.
    ::fcntl(from_child[1], F_SETPIPE_SZ, 1 << 20);
  }
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw_errno("open log file");
  const int stdout_fd =
      spec.stdout_file.empty()
          ? ::fcntl(log_fd, F_DUPFD_CLOEXEC, 0)
          : ::open(spec.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (stdout_fd < 0) throw_errno("open output file");
  const std::string input = spec.stdin_file.empty() ? "/dev/null" : spec.stdin_file.string();
  const int stdin_fd = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
  if (stdin_fd < 0) {
    const int error = errno;
    ::close(log_fd);
    ::close(stdout_fd);
    errno = error;
    throw_errno("open input file");
  }
  const pid_t parent = ::getpid();
  const std::string directory = spec.working_directory.string();
  const std::string cgroup_procs = spec.cgroup_procs.string();

  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    ::setsid();  // own process group: the whole group can be killed, grandchildren included
    if (spec.detached) {
      const pid_t inner = ::fork();
      if (inner != 0) ::_exit(inner < 0 ? 127 : 0);
      ::setsid();  // not in the group of the first process, whose pid spawn() returns
    } else {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    lower_cpu_priority(spec.nice);  // its own session and autogroup: both
    if (!directory.empty() && ::chdir(directory.c_str()) != 0) ::_exit(127);
    if (!cgroup_procs.empty()) {
      const int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) {
        const char message[] = "cudal1: cannot join the worker's cgroup\n";
        (void)!::write(2, message, sizeof(message) - 1);
        ::_exit(126);
      }
      ::close(fd);
    }
    apply_limits(spec.limits);
    // Move the pipe ends out of the way before placing them on fds 3 and 4.
    const bool control = spec.control_pipes || spec.control_socket;
    const int in = control ? ::fcntl(to_child[0], F_DUPFD, 10) : -1;
    const int out = spec.control_pipes ? ::fcntl(from_child[1], F_DUPFD, 10) : -1;
    const int logs = ::fcntl(log_fd, F_DUPFD, 10);
    const int outs = ::fcntl(stdout_fd, F_DUPFD, 10);
    const int ins = ::fcntl(stdin_fd, F_DUPFD, 10);
    const int given = spec.fd3 >= 0 ? ::fcntl(spec.fd3, F_DUPFD, 10) : -1;
    ::dup2(ins, 0);
    ::dup2(outs, 1);
    ::dup2(logs, 2);
    if (control) ::dup2(in, 3);
    if (given >= 0) ::dup2(given, 3);
    if (spec.control_pipes) ::dup2(out, 4);
    ::syscall(SYS_close_range, spec.control_pipes ? 5u : (control || given >= 0 ? 4u : 3u), ~0u,
              0u);
    ::execve(argv[0], argv.data(), envp.data());
    const char message[] = "cudal1: cannot execute the worker program\n";
    (void)!::write(2, message, sizeof(message) - 1);
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(stdout_fd);
  ::close(stdin_fd);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
  child->pid_ = pid;
  if (spec.detached) {
    // Its first process only forked the real one and ended.
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child->exit_ = decode(status);
  }
  if (spec.control_pipes || spec.control_socket) {
    ::close(to_child[0]);
    ::close(from_child[1]);
    child->request_fd_ = to_child[1];
    child->reply_fd_ = from_child[0];
  }
  return child;
}

std::unique_ptr<ChildProcess> ChildProcess::adopt(pid_t pid, int request_fd, int reply_fd,
                                                  std::function<std::optional<ExitStatus>()> ended,
                                                  std::function<void()> gone) {
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
  child->pid_ = pid;
  child->request_fd_ = request_fd;
  child->reply_fd_ = reply_fd;
  child->ended_ = std::move(ended);
  child->gone_ = std::move(gone);
  return child;
}

ChildProcess::~ChildProcess() {
  if (!exit_) kill_group();
  if (request_fd_ >= 0) ::close(request_fd_);
  if (reply_fd_ >= 0) ::close(reply_fd_);
  if (gone_) gone_();
}

void ChildProcess::close_request_fd() {
  if (request_fd_ >= 0) ::close(request_fd_);
  request_fd_ = -1;
}

std::optional<ExitStatus> ChildProcess::poll_exit() {
  if (exit_) return exit_;
  if (ended_) {
    exit_ = ended_();
    return exit_;
  }
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) exit_ = decode(status);
  return exit_;
}

std::optional<ExitStatus> ChildProcess::wait_or_kill(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto status = poll_exit()) {
      ::kill(-pid_, SIGKILL);  // leftovers the candidate started in the group
      return *status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill_group();
  return std::nullopt;
}

ExitStatus ChildProcess::kill_group() {
  if (!exit_) {
    // Descendants that left the group (a new session) are stopped first, all of them, so that
    // none can start another while the others are killed, and while the child still links
    // them: once it is dead they belong to init.
    stop_tree();
    const auto tree = process_tree(pid_);
    ::kill(-pid_, SIGKILL);
    for (const auto& process : tree) ::kill(process.pid, SIGKILL);
    if (ended_) {
      // Its parent reaps it and says so; a parent that never does (it died too) leaves SIGKILL.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!(exit_ = ended_()) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!exit_) exit_ = ExitStatus{true, 0, SIGKILL};
      return *exit_;
    }
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_ = decode(status);
  } else {
    ::kill(-pid_, SIGKILL);
  }
  return *exit_;
}

void ChildProcess::stop_tree() const {
  // A stopped process starts nothing: passes until one finds no process it had not stopped.
  std::set<pid_t> stopped;
  for (int pass = 0; pass < 100; ++pass) {
    bool more = false;
    for (const auto& process : process_tree(pid_)) {
      if (!stopped.insert(process.pid).second) continue;
      ::kill(process.pid, SIGSTOP);
      more = true;
    }
    if (!more) return;
  }
}

void ChildProcess::set_group_running(bool running) {
  if (exit_) return;
  ::kill(-pid_, running ? SIGCONT : SIGSTOP);
  if (!running) {
    stop_tree();
    return;
  }
  for (const auto& process : process_tree(pid_)) ::kill(process.pid, SIGCONT);
}

ChildProcess::Usage ChildProcess::group_usage() const {
  static const long page = ::sysconf(_SC_PAGESIZE);
  static const double ticks_per_second = static_cast<double>(::sysconf(_SC_CLK_TCK));
  Usage usage;
  double ticks = 0;
  for (const auto& process : recent_process_tree(pid_, std::chrono::milliseconds(50))) {
    usage.resident_bytes += static_cast<std::uint64_t>(std::max(0L, process.rss_pages)) *
                            static_cast<std::uint64_t>(page);
    ticks += process.cpu_ticks;
  }
  usage.cpu_seconds = ticks / ticks_per_second;
  return usage;
}

std::optional<pid_t> find_in_tree(pid_t root, pid_t namespace_pid, pid_t parent) {
  for (const auto& process : process_tree(root)) {
    if (parent != 0 && process.ppid != parent) continue;
    std::ifstream status("/proc/" + std::to_string(process.pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      const auto last = line.find_last_of(" \t");
      if (last != std::string::npos && std::atol(line.c_str() + last + 1) == namespace_pid)
        return process.pid;
      break;
    }
  }
  return std::nullopt;
}

std::string run_and_capture(const ProcessSpec& spec, double timeout_seconds) {
  static std::atomic<unsigned> counter{0};
  ProcessSpec captured = spec;
  captured.stdout_file = std::filesystem::temp_directory_path() /
                         fmt::format("cudal1-capture-{}-{}.out", ::getpid(), counter++);
  auto child = ChildProcess::spawn(captured);
  const std::optional<ExitStatus> status = child->wait_or_kill(timeout_seconds);
  std::string text;
  {
    std::ifstream in(captured.stdout_file, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    text = content.str();
  }
  std::filesystem::remove(captured.stdout_file);
  if (!status) {
    throw std::runtime_error(
        fmt::format("'{}' did not finish within {} s", spec.argv.front(), timeout_seconds));
  }
  if (status->signaled || status->code != 0) {
    throw std::runtime_error(
        fmt::format("'{}' failed ({})", spec.argv.front(), status->describe()));
  }
  return text;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? name : "unknown";
}

}  // namespace cudal1
