// The orchestrator's side of a zygote: started by a thread of its own that lives as long as the
// process (a parent-death signal ties the zygote to the thread that started it), which then reads
// everything the zygote reports; spawns answered through it.
#include "cudal1/eval/worker_forks.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "cudal1/common/file_lock.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/eval/worker_client.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {
namespace {

namespace fk = worker_protocol::fork;
using json = nlohmann::json;

// Long enough for PyTorch's import on a machine busy with builds.
constexpr auto kReadyTimeout = std::chrono::seconds(600);
// A shared zygote's socket refuses connections until its import is done.
constexpr auto kListenTimeout = std::chrono::seconds(180);
constexpr auto kSpawnTimeout = std::chrono::seconds(60);

ExitStatus decode_ended(const json& report) {
  ExitStatus status;
  if (report.contains(fk::kSignal)) {
    status.signaled = true;
    status.signal = report[fk::kSignal].get<int>();
  } else {
    status.code = report.value(fk::kCode, 0);
  }
  return status;
}

void close_all(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

sockaddr_un socket_address(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof(address.sun_path))
    throw std::runtime_error("the zygote's socket path is too long: " + path.string());
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

int try_connect(const sockaddr_un& address) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0)
    return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// The spool of a shared zygote must be this user's own folder, which nobody else can enter.
void check_spool(const std::filesystem::path& spool) {
  std::filesystem::create_directories(spool);
  ::chmod(spool.c_str(), 0700);
  struct stat info {};
  if (::lstat(spool.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() ||
      (info.st_mode & 077) != 0) {
    throw std::runtime_error(spool.string() + " is not a private folder of this user");
  }
}

// A connection to the shared zygote of `spec`, started (detached) when none listens; its pid in
// this process's PID namespace in `zygote`.
int connect_shared(const ZygoteSpec& spec, pid_t& zygote) {
  check_spool(spec.spool);
  FileLock lock = FileLock::acquire(spec.spool / "zygote.lock");
  const std::filesystem::path path = spec.spool / "zygote.sock";
  const sockaddr_un address = socket_address(path);
  int fd = try_connect(address);
  if (fd < 0) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    const int bound = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (bound < 0 ||
        ::bind(bound, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      close_all({bound});
      throw std::system_error(errno, std::generic_category(), "binding " + path.string());
    }
    ::chmod(path.c_str(), 0600);
    ProcessSpec process = spec.process;
    process.control_socket = false;
    process.fd3 = bound;
    process.detached = true;
    try {
      ChildProcess::spawn(process);
    } catch (...) {
      ::close(bound);
      throw;
    }
    ::close(bound);
    const auto deadline = Clock::now() + kListenTimeout;
    while ((fd = try_connect(address)) < 0) {
      if (Clock::now() > deadline)
        throw std::runtime_error("the shared zygote did not listen in time: " +
                                 trim_log_file(spec.process.log_file));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ucred peer{};
  socklen_t size = sizeof(peer);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.pid <= 0) {
    ::close(fd);
    throw std::runtime_error("the shared zygote's process cannot be told");
  }
  zygote = peer.pid;
  return fd;
}

}  // namespace

// How a fork ended, once its zygote has said so; shared with the process object that watches it.
struct Zygote::Ended {
  std::mutex mutex;
  std::optional<ExitStatus> status;
};

struct Zygote::State {
  ZygoteSpec spec;
  std::unique_ptr<ChildProcess> process;  // a private zygote
  int socket = -1;                        // the connection to it
  pid_t host_pid = 0;  // the zygote itself (the started process may be bubblewrap)
  double preload_s = 0;

  std::mutex mutex;
  std::condition_variable changed;
  bool ready = false;
  bool dead = false;
  bool unusable = false;  // it works but its forks could not: not started again
  std::string error;
  std::map<std::uint64_t, json> answers;
  std::map<pid_t, std::shared_ptr<Ended>> live;
  std::uint64_t next_id = 0;
  std::mutex send_mutex;

  void listen();
  void handle(const json& report);
  void die(const std::string& why);
};

void Zygote::State::die(const std::string& why) {
  std::lock_guard lock(mutex);
  dead = true;
  if (error.empty()) error = why;
  // Its workers end with it (their parent-death signal).
  for (auto& [pid, ended] : live) {
    std::lock_guard ended_lock(ended->mutex);
    if (!ended->status) ended->status = ExitStatus{true, 0, SIGKILL};
  }
  live.clear();
  changed.notify_all();
}

void Zygote::State::handle(const json& report) {
  std::lock_guard lock(mutex);
  if (report.contains(fk::kReady)) {
    if (process) {
      const auto found = find_in_tree(process->pid(), report.at(fk::kPid).get<pid_t>());
      host_pid = found ? *found : process->pid();
    }
    preload_s = report.value(fk::kPreloadS, 0.0);
    if (!report.value(fk::kForkSafe, false)) {
      dead = unusable = true;
      error = "its forks could not use CUDA (PyTorch's import asked the CUDA runtime)";
    } else {
      ready = true;
    }
  } else if (report.contains(fk::kSpawned)) {
    live[report.at(fk::kPid).get<pid_t>()] = std::make_shared<Ended>();
    answers[report[fk::kSpawned].get<std::uint64_t>()] = report;
  } else if (report.contains(fk::kFailed)) {
    answers[report[fk::kFailed].get<std::uint64_t>()] = report;
  } else if (report.contains(fk::kExited)) {
    const auto it = live.find(report[fk::kExited].get<pid_t>());
    if (it != live.end()) {
      std::lock_guard ended_lock(it->second->mutex);
      it->second->status = decode_ended(report);
      live.erase(it);
    }
  }
  changed.notify_all();
}

void Zygote::State::listen() {
  try {
    if (spec.shared) {
      pid_t zygote = 0;
      const int fd = connect_shared(spec, zygote);
      std::lock_guard lock(mutex);
      socket = fd;
      host_pid = zygote;
    } else {
      process = ChildProcess::spawn(spec.process);
      std::lock_guard lock(mutex);
      socket = process->request_fd();
    }
  } catch (const std::exception& e) {
    die(e.what());
    return;
  }
  std::string buffer(1 << 16, '\0');
  for (;;) {
    const ssize_t n = ::recv(socket, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const json report = json::parse(buffer.substr(0, static_cast<std::size_t>(n)), nullptr, false);
    if (!report.is_discarded()) handle(report);
    std::lock_guard lock(mutex);
    if (dead) break;
  }
  if (!process) {
    ::close(socket);  // a shared zygote ends this process's workers when it sees this
    die("the connection to it ended: " + trim_log_file(spec.process.log_file));
    return;
  }
  const auto status = process->wait_or_kill(unusable ? 0.2 : 5);
  if (!status || status->signaled || status->code != 0)
    die(fmt::format("it ended ({}): {}", status ? status->describe() : "killed",
                    trim_log_file(spec.process.log_file)));
  die("it ended");
}

std::shared_ptr<Zygote> Zygote::obtain(const ZygoteSpec& spec) {
  static std::mutex registry_mutex;
  static std::map<std::string, std::shared_ptr<State>> registry;
  std::shared_ptr<State> state;
  {
    std::lock_guard lock(registry_mutex);
    auto& slot = registry[spec.key];
    bool usable = false;
    if (slot) {
      std::lock_guard state_lock(slot->mutex);
      if (slot->unusable)
        throw std::runtime_error("the warm workers' zygote could not start: " + slot->error);
      usable = !slot->dead;
    }
    if (!usable) {
      slot = std::make_shared<State>();
      slot->spec = spec;
      std::filesystem::create_directories(spec.spool);
      ::chmod(spec.spool.c_str(), 0700);
      // Lives as long as the process: the zygote's parent-death signal is this thread's.
      std::thread([state = slot] { state->listen(); }).detach();
    }
    state = slot;
  }
  std::unique_lock lock(state->mutex);
  if (!state->changed.wait_for(lock, kReadyTimeout, [&] { return state->ready || state->dead; }))
    throw std::runtime_error("the warm workers' zygote did not become ready in time");
  if (!state->ready)
    throw std::runtime_error("the warm workers' zygote could not start: " + state->error);
  return std::make_shared<Zygote>(state);
}

const std::filesystem::path& Zygote::spool() const {
  return state_->spec.spool;
}

double Zygote::preload_seconds() const {
  return state_->preload_s;
}

std::unique_ptr<ChildProcess> Zygote::spawn(json request, const std::filesystem::path& log,
                                            const CgroupScope* cgroup) {
  int to_worker[2] = {-1, -1}, from_worker[2] = {-1, -1}, go[2] = {-1, -1};
  if (::pipe2(to_worker, O_CLOEXEC) != 0 || ::pipe2(from_worker, O_CLOEXEC) != 0 ||
      ::pipe2(go, O_CLOEXEC) != 0) {
    close_all({to_worker[0], to_worker[1], from_worker[0], from_worker[1], go[0], go[1]});
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  ::fcntl(from_worker[1], F_SETPIPE_SZ, 1 << 20);  // as ChildProcess::spawn's reply pipe
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const std::string name = request.value(fk::kName, std::string());
  const std::filesystem::path folder = name.empty() ? std::filesystem::path() : spool() / name;
  auto fail = [&](const std::string& why) -> std::runtime_error {
    close_all({to_worker[1], from_worker[0], go[1]});
    return std::runtime_error("forking a warm worker failed: " + why);
  };
  std::uint64_t id = 0;
  {
    std::lock_guard lock(state_->mutex);
    id = ++state_->next_id;
  }
  request[fk::kId] = id;
  const std::string text = request.dump();
  const int fds[fk::kDescriptors] = {to_worker[0], from_worker[1], log_fd, go[0]};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  iovec io{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(header), fds, sizeof(fds));
  ssize_t sent = -1;
  {
    std::lock_guard lock(state_->send_mutex);
    if (log_fd >= 0) sent = ::sendmsg(state_->socket, &message, MSG_NOSIGNAL);
  }
  const int send_error = errno;
  close_all({to_worker[0], from_worker[1], log_fd, go[0]});
  if (log_fd < 0) throw fail("cannot open " + log.string());
  if (sent < 0) throw fail(std::strerror(send_error));

  json answer;
  std::shared_ptr<Ended> ended;
  pid_t zygote = 0;
  {
    std::unique_lock lock(state_->mutex);
    if (!state_->changed.wait_for(lock, kSpawnTimeout,
                                  [&] { return state_->answers.count(id) || state_->dead; }))
      throw fail("the zygote did not answer");
    if (state_->dead) throw fail("the zygote ended: " + state_->error);
    answer = std::move(state_->answers[id]);
    state_->answers.erase(id);
    if (answer.contains(fk::kFailed)) throw fail(answer.value(fk::kError, "unknown error"));
    const auto it = state_->live.find(answer.at(fk::kPid).get<pid_t>());
    ended = it != state_->live.end() ? it->second : std::make_shared<Ended>();
    zygote = state_->host_pid;
  }
  const pid_t in_zygote = answer.at(fk::kPid).get<pid_t>();
  const auto pid = find_in_tree(zygote, in_zygote, zygote);
  if (!pid) throw fail(fmt::format("its process ({} in the zygote) is not there", in_zygote));
  if (cgroup != nullptr) {
    std::ofstream procs(cgroup->procs_file());
    procs << *pid << std::flush;
    if (!procs) throw fail("it cannot join its cgroup " + cgroup->path().string());
  }
  const char byte = 1;
  if (::write(go[1], &byte, 1) != 1) throw fail("it ended before it started");
  ::close(go[1]);
  return ChildProcess::adopt(
      *pid, to_worker[1], from_worker[0],
      [ended]() -> std::optional<ExitStatus> {
        std::lock_guard lock(ended->mutex);
        return ended->status;
      },
      [folder] {
        std::error_code ec;
        if (!folder.empty()) std::filesystem::remove_all(folder, ec);
      });
}

}  // namespace cudal1
