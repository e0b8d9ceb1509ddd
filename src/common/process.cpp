#include "cudal1/common/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

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

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos && overrides.count(entry.substr(0, eq))) continue;
    out.push_back(entry);
  }
  for (const auto& [key, value] : overrides) out.push_back(key + "=" + value);
  return out;
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
  std::vector<std::string> env = merged_environment(spec.environment);
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);
  const std::string log = spec.log_file.empty() ? "/dev/null" : spec.log_file.string();

  int to_child[2] = {-1, -1};
  int from_child[2] = {-1, -1};
  if (spec.control_pipes) {
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

  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    ::setsid();  // own process group: the whole group can be killed, grandchildren included
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (spec.nice != 0) (void)::nice(spec.nice);
    // Move the pipe ends out of the way before placing them on fds 3 and 4.
    const int in = spec.control_pipes ? ::fcntl(to_child[0], F_DUPFD, 10) : -1;
    const int out = spec.control_pipes ? ::fcntl(from_child[1], F_DUPFD, 10) : -1;
    const int logs = ::fcntl(log_fd, F_DUPFD, 10);
    const int outs = ::fcntl(stdout_fd, F_DUPFD, 10);
    const int ins = ::fcntl(stdin_fd, F_DUPFD, 10);
    ::dup2(ins, 0);
    ::dup2(outs, 1);
    ::dup2(logs, 2);
    if (spec.control_pipes) {
      ::dup2(in, 3);
      ::dup2(out, 4);
    }
    ::syscall(SYS_close_range, spec.control_pipes ? 5u : 3u, ~0u, 0u);
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
  if (spec.control_pipes) {
    ::close(to_child[0]);
    ::close(from_child[1]);
    child->request_fd_ = to_child[1];
    child->reply_fd_ = from_child[0];
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (!exit_) kill_group();
  if (request_fd_ >= 0) ::close(request_fd_);
  if (reply_fd_ >= 0) ::close(reply_fd_);
}

void ChildProcess::close_request_fd() {
  if (request_fd_ >= 0) ::close(request_fd_);
  request_fd_ = -1;
}

std::optional<ExitStatus> ChildProcess::poll_exit() {
  if (exit_) return exit_;
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
  ::kill(-pid_, SIGKILL);
  if (!exit_) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_ = decode(status);
  }
  return *exit_;
}

void ChildProcess::set_group_running(bool running) {
  if (!exit_) ::kill(-pid_, running ? SIGCONT : SIGSTOP);
}

std::uint64_t ChildProcess::group_resident_bytes() const {
  static const long page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t total = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp != pid_) continue;
    std::string skip;
    for (int i = 0; i < 18; ++i) fields >> skip;  // fields 6..23; rss is field 24
    long rss_pages = 0;
    fields >> rss_pages;
    total += static_cast<std::uint64_t>(rss_pages) * static_cast<std::uint64_t>(page);
  }
  ::closedir(proc);
  return total;
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

}  // namespace cudal1
