// The zygote's loop (spawn requests in, forked workers' ends out) and what a forked worker does
// before its first request: its namespaces, its view of the files, its limits, its privileges.
#include "zygote.hpp"

#include <Python.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/common/cpu_priority.hpp"
#include "cudal1/common/proc_tree.hpp"
#include "cudal1/worker/protocol.hpp"
#include "session.hpp"

namespace cudal1::worker {
namespace {

using json = nlohmann::json;
namespace proto = cudal1::worker_protocol;
namespace fk = proto::fork;

struct Spawn {
  json request;
  int fds[fk::kDescriptors] = {-1, -1, -1, -1};
};

// A forked worker that cannot make the view or the limits it was asked for ends here, before any
// request: the orchestrator sees its end and fails the worker with this line in its log.
[[noreturn]] void die(const std::string& what) {
  const std::string line = "cudal1-worker: " + what + ": " + std::strerror(errno) + "\n";
  (void)!::write(2, line.data(), line.size());
  ::_exit(126);
}

void send_json(int fd, const json& value) {
  const std::string text = value.dump();
  (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

// One spawn request; nullopt at the end of the socket.
std::optional<Spawn> receive_spawn(int fd) {
  std::string buffer(1 << 16, '\0');
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * fk::kDescriptors)];
  for (;;) {
    iovec io{buffer.data(), buffer.size()};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    Spawn spawn;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      std::memcpy(spawn.fds, CMSG_DATA(c), sizeof(int) * std::min<std::size_t>(count, 4));
    }
    spawn.request = json::parse(buffer.substr(0, static_cast<std::size_t>(n)), nullptr, false);
    return spawn;
  }
}

void mount_or_die(const char* source, const std::string& target, const char* type,
                  unsigned long flags, const char* data = nullptr) {
  if (::mount(source, target.c_str(), type, flags, data) != 0) die("mount " + target);
}

// The worker's own mount namespace: its inputs read-only and its build folder at the fixed paths,
// the spool (every other worker's folder) hidden, a fresh /tmp, /dev/shm and /proc.
void enter_own_view(const json& spawn) {
  mount_or_die(nullptr, "/", nullptr, MS_REC | MS_PRIVATE);
  const std::string own =
      std::string(fk::kSpoolPath) + "/" + spawn.at(fk::kName).get<std::string>();
  constexpr unsigned long kLocked = MS_NOSUID | MS_NODEV;
  mount_or_die((own + "/inputs").c_str(), fk::kInputsPath, nullptr, MS_BIND);
  mount_or_die(nullptr, fk::kInputsPath, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kLocked);
  if (::access((own + "/extensions").c_str(), F_OK) == 0) {
    mount_or_die((own + "/extensions").c_str(), fk::kExtensionsPath, nullptr, MS_BIND);
    mount_or_die(nullptr, fk::kExtensionsPath, nullptr, MS_BIND | MS_REMOUNT | kLocked);
  }
  mount_or_die("spool", fk::kSpoolPath, "tmpfs", MS_RDONLY | kLocked | MS_NOEXEC,
               "size=4k,mode=0555");
  const std::string size =
      "mode=1777,size=" + std::to_string(spawn.value(fk::kTmpBytes, std::uint64_t{1} << 29));
  mount_or_die("tmp", "/tmp", "tmpfs", kLocked, size.c_str());
  mount_or_die("shm", "/dev/shm", "tmpfs", kLocked, size.c_str());
  // Its own PID namespace's processes only. Where the kernel refuses (a /proc with parts covered),
  // the zygote's /proc stays: other workers are listed there but are in other PID namespaces, so
  // this one can neither signal nor trace them, and they are not dumpable.
  if (::mount("proc", "/proc", "proc", kLocked | MS_NOEXEC, nullptr) != 0) {
    const char line[] = "cudal1-worker: note: /proc could not be mounted again\n";
    (void)!::write(2, line, sizeof(line) - 1);
  }
}

void apply_limits(const json& spawn) {
  const auto set = [](int resource, std::uint64_t value) {
    const rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
    if (::setrlimit(resource, &limit) != 0) die("setrlimit");
  };
  if (spawn.value(fk::kCpuSeconds, 0ull) > 0) set(RLIMIT_CPU, spawn[fk::kCpuSeconds]);
  if (spawn.value(fk::kFileBytes, 0ull) > 0) set(RLIMIT_FSIZE, spawn[fk::kFileBytes]);
  if (spawn.value(fk::kTasks, 0ull) > 0) set(RLIMIT_NPROC, spawn[fk::kTasks]);
  set(RLIMIT_CORE, 0);
}

// No capability in any set, none to regain (bounding set empty, no new privileges), not dumpable;
// a user of its own where the zygote is root.
void drop_privileges(const json& spawn) {
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) die("PR_SET_DUMPABLE");
  if (spawn.value(fk::kSandboxed, false)) {
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die("PR_CAPBSET_DROP");
    }
  }
  if (spawn.contains(fk::kUid)) {
    const auto uid = spawn[fk::kUid].get<uid_t>();
    const auto gid = spawn[fk::kGid].get<gid_t>();
    if (::setgroups(0, nullptr) != 0) die("setgroups");
    if (::setresgid(gid, gid, gid) != 0) die("setresgid");
    if (::setresuid(uid, uid, uid) != 0) die("setresuid");
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  if (::syscall(SYS_capset, &header, none) != 0) die("capset");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("PR_SET_NO_NEW_PRIVS");
  __user_cap_data_struct now[2] = {};
  if (::syscall(SYS_capget, &header, now) != 0 || now[0].effective || now[0].permitted ||
      now[1].effective || now[1].permitted) {
    die("capabilities remain");
  }
}

// stdin /dev/null, stdout and stderr the log, requests on 3, replies on 4, nothing else.
void place_descriptors(const Spawn& spawn) {
  const int null = ::open("/dev/null", O_RDONLY);
  const int moved[4] = {::fcntl(null, F_DUPFD, 10), ::fcntl(spawn.fds[fk::kLogIndex], F_DUPFD, 10),
                        ::fcntl(spawn.fds[fk::kRequestIndex], F_DUPFD, 10),
                        ::fcntl(spawn.fds[fk::kReplyIndex], F_DUPFD, 10)};
  if (::dup2(moved[0], 0) < 0 || ::dup2(moved[1], 1) < 0 || ::dup2(moved[1], 2) < 0 ||
      ::dup2(moved[2], proto::kRequestFd) < 0 || ::dup2(moved[3], proto::kReplyFd) < 0) {
    die("dup2");
  }
  ::syscall(SYS_close_range, 5u, ~0u, 0u);
}

// The forked worker, from the zygote's fork to the end of its session; never returns.
[[noreturn]] void become_worker(PythonRuntime& runtime, int control_fd, pid_t zygote,
                                const Spawn& spawn) {
  ::close(control_fd);
  ::setsid();
  // Its own session and autogroup now: a build's priority goes to both, while this process may
  // still change its group (lower_cpu_priority).
  lower_cpu_priority(spawn.request.value(fk::kNice, 0));
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != zygote) ::_exit(125);
  // Until the orchestrator has put this process in the worker's cgroup.
  char go = 0;
  if (::read(spawn.fds[fk::kGoIndex], &go, 1) != 1) ::_exit(125);
  ::close(spawn.fds[fk::kGoIndex]);
  place_descriptors(spawn);  // from here on a failure is written to the worker's own log
  const json& request = spawn.request;
  const bool sandboxed = request.value(fk::kSandboxed, false);
  // Open while this process lives: the worker below sees it hang up if this one died before the
  // worker's parent-death signal was armed for good.
  int alive[2] = {-1, -1};
  if (sandboxed) {
    if (::unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) != 0) die("unshare");
    if (::pipe2(alive, O_CLOEXEC) != 0) die("pipe2");
    const pid_t worker = ::fork();
    if (worker < 0) die("fork");
    if (worker > 0) {
      // The first process of the namespace is the worker; this one reports how it ended, as
      // bubblewrap does (128 + N for signal N).
      const unsigned keep = static_cast<unsigned>(alive[1]);
      if (keep > 3) ::syscall(SYS_close_range, 3u, keep - 1, 0u);
      ::syscall(SYS_close_range, keep + 1, ~0u, 0u);
      int status = 0;
      while (::waitpid(worker, &status, 0) < 0 && errno == EINTR) {
      }
      ::_exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
    }
    ::close(alive[1]);
    enter_own_view(request);
  }
  apply_limits(request);
  drop_privileges(request);
  // Becoming another user cleared the parent-death signal: armed again, then checked that the
  // parent did not die before (a worker whose parent died would run on, unwatched, for ever).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (alive[0] >= 0) {
    pollfd parent{alive[0], POLLIN, 0};
    if (::poll(&parent, 1, 0) != 0) ::_exit(125);  // hung up: the parent is gone
    ::close(alive[0]);
  } else if (::getppid() != zygote) {
    ::_exit(125);
  }
  PyOS_AfterFork_Child();
  int code = 0;
  try {
    py::dict environment;
    const json own = request.value(fk::kEnvironment, json::object());
    for (const auto& [key, value] : own.items())
      environment[py::str(key)] = py::str(value.get<std::string>());
    runtime.host("enter_worker")(environment, request.value(fk::kDirectory, std::string()));
    Session session(runtime, proto::kRequestFd, proto::kReplyFd);
    code = session.run();
  } catch (const std::exception& e) {
    const std::string line = std::string("cudal1-worker: ") + e.what() + "\n";
    (void)!::write(2, line.data(), line.size());
    code = 1;
  }
  std::fflush(nullptr);
  ::_exit(code);
}

// A fork and what it started. A sandboxed fork's worker is the first process of a PID namespace
// of its own: no parent-death signal reaches it (the kernel spares a namespace's first process
// every signal it does not handle), so it is killed here, from the namespace above, which ends
// everything in its namespace; then the fork and its process group.
void kill_fork(pid_t pid) {
  const auto tree = process_tree(pid);  // the fork first, then by depth
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) ::kill(it->pid, SIGKILL);
  ::kill(-pid, SIGKILL);
}

// How long a shared zygote with no connection and no worker stays for the next cudal1 process.
constexpr auto kIdleExit = std::chrono::seconds(60);

bool is_listening(int fd) {
  int accepting = 0;
  socklen_t size = sizeof(accepting);
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &size) == 0 && accepting != 0;
}

// A first fork that only asks whether it could use CUDA: where it could not, the orchestrator
// starts its workers one by one instead.
bool forks_can_use_cuda(PythonRuntime& runtime) {
  PyOS_BeforeFork();
  const pid_t probe = ::fork();
  if (probe == 0) {
    PyOS_AfterFork_Child();
    bool safe = false;
    try {
      safe = runtime.host("fork_safe")().cast<bool>();
    } catch (const std::exception&) {
    }
    ::_exit(safe ? 0 : 1);
  }
  PyOS_AfterFork_Parent();
  int probed = 0;
  while (probe > 0 && ::waitpid(probe, &probed, 0) < 0 && errno == EINTR) {
  }
  return probe > 0 && WIFEXITED(probed) && WEXITSTATUS(probed) == 0;
}

// The zygote's state: its connections (one, or as many as cudal1 processes use a shared zygote)
// and which connection each forked worker belongs to.
class Zygote {
 public:
  Zygote(PythonRuntime& runtime, json ready) : runtime_(runtime), ready_(std::move(ready)) {}

  void add(int connection) {
    send_json(connection, ready_);
    connections_.push_back(connection);
  }
  bool idle() const { return connections_.empty() && owners_.empty(); }
  const std::vector<int>& connections() const { return connections_; }

  // A spawn request on `connection`, or its end (its process ended: so do its workers).
  void serve(int connection) {
    std::optional<Spawn> spawn = receive_spawn(connection);
    if (!spawn) {
      for (const auto& [pid, owner] : owners_)
        if (owner == connection) kill_fork(pid);
      ::close(connection);
      connections_.erase(std::find(connections_.begin(), connections_.end(), connection));
      return;
    }
    const json id = spawn->request.value(fk::kId, json());
    if (spawn->request.is_discarded() || spawn->fds[fk::kDescriptors - 1] < 0) {
      send_json(connection, {{fk::kFailed, id}, {fk::kError, "a spawn without its descriptors"}});
    } else {
      PyOS_BeforeFork();
      const pid_t pid = ::fork();
      if (pid == 0) become_worker(runtime_, connection, ready_[fk::kPid].get<pid_t>(), *spawn);
      PyOS_AfterFork_Parent();
      if (pid < 0) {
        send_json(connection, {{fk::kFailed, id}, {fk::kError, std::strerror(errno)}});
      } else {
        owners_[pid] = connection;
        send_json(connection, {{fk::kSpawned, id}, {fk::kPid, pid}});
      }
    }
    for (int descriptor : spawn->fds)
      if (descriptor >= 0) ::close(descriptor);
  }

  // Each ended worker, reported to the connection it belongs to.
  void report_ended() {
    int status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      const auto it = owners_.find(pid);
      if (it == owners_.end()) continue;
      json ended = {{fk::kExited, pid}};
      if (WIFSIGNALED(status)) {
        ended[fk::kSignal] = WTERMSIG(status);
      } else {
        ended[fk::kCode] = WEXITSTATUS(status);
      }
      if (std::find(connections_.begin(), connections_.end(), it->second) != connections_.end())
        send_json(it->second, ended);
      owners_.erase(it);
    }
  }

 private:
  PythonRuntime& runtime_;
  json ready_;
  std::vector<int> connections_;
  std::map<pid_t, int> owners_;
};

}  // namespace

int run_zygote(PythonRuntime& runtime, int control_fd) {
  const auto begin = std::chrono::steady_clock::now();
  runtime.host("preload")();
  std::fflush(nullptr);
  Zygote zygote(
      runtime, {{fk::kReady, true},
                {fk::kPid, ::getpid()},
                {fk::kForkSafe, forks_can_use_cuda(runtime)},
                {fk::kPreloadS,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count()}});
  // A shared zygote gets its socket bound, not listening: a client that connects before this
  // finds it refused, and one that connects after sees this process as the socket's (its
  // SO_PEERCRED pid is this process's, in the client's own PID namespace).
  const bool shared = !is_listening(control_fd) && ::listen(control_fd, 128) == 0;
  if (!shared) zygote.add(control_fd);
  auto idle_since = std::chrono::steady_clock::now();
  for (;;) {
    std::vector<pollfd> fds;
    if (shared) fds.push_back({control_fd, POLLIN, 0});
    for (int connection : zygote.connections()) fds.push_back({connection, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    zygote.report_ended();
    for (const pollfd& fd : fds) {
      if ((fd.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      if (shared && fd.fd == control_fd) {
        const int connection = ::accept4(control_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection >= 0) zygote.add(connection);
      } else {
        zygote.serve(fd.fd);
      }
    }
    if (!zygote.idle()) {
      idle_since = std::chrono::steady_clock::now();
    } else if (!shared) {
      break;  // its one connection ended
    } else if (std::chrono::steady_clock::now() - idle_since > kIdleExit) {
      pollfd pending{control_fd, POLLIN, 0};
      if (::poll(&pending, 1, 0) == 0) break;  // idle long enough, and nobody knocking
    }
  }
  return 0;  // any forked worker left ends with it (its parent-death signal)
}

}  // namespace cudal1::worker
