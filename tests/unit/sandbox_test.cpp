#include "cudal1/common/sandbox.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/eval/worker_sandbox.hpp"
#include "process_probe.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

using test_support::alive;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Waits until `path` holds a line (a pid written by a child), or gives up.
std::string wait_for_line(const fs::path& path) {
  for (int i = 0; i < 200; ++i) {
    const std::string text = read_file(path);
    if (text.find('\n') != std::string::npos) return text.substr(0, text.find('\n'));
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return "";
}

fs::path sandbox_scratch(const std::string& name) {
  return test_support::scratch("cudal1-sandbox-test-", name);
}

bool has(const std::vector<std::string>& argv, const std::string& item) {
  return std::find(argv.begin(), argv.end(), item) != argv.end();
}

TEST(SandboxEnvironment, KeepsWhatABuildNeedsAndNoSecret) {
  ::setenv("CUDAL1_API_KEY", "secret-1", 1);
  ::setenv("CUDAL1_SERVE_TOKEN", "secret-2", 1);
  ::setenv("OPENAI_API_KEY", "secret-3", 1);
  ::setenv("https_proxy", "http://proxy:3128", 1);
  ::setenv("LC_ALL", "C.UTF-8", 1);
  ::setenv("TORCH_CUDA_ARCH_LIST", "9.0", 1);
  ::setenv("SOME_OTHER_SETTING", "x", 1);
  const auto env = allowlisted_environment({{"HOME", "/tmp"}, {"TORCH_EXTENSIONS_DIR", "/ext"}});
  for (const char* gone : {"CUDAL1_API_KEY", "CUDAL1_SERVE_TOKEN", "OPENAI_API_KEY", "https_proxy",
                           "SOME_OTHER_SETTING"})
    EXPECT_EQ(env.count(gone), 0u) << gone;
  EXPECT_EQ(env.at("LC_ALL"), "C.UTF-8");
  EXPECT_EQ(env.at("TORCH_CUDA_ARCH_LIST"), "9.0");
  EXPECT_EQ(env.at("HOME"), "/tmp");
  EXPECT_EQ(env.at("TORCH_EXTENSIONS_DIR"), "/ext");
  if (const char* path = std::getenv("PATH")) {
    EXPECT_EQ(env.at("PATH"), path);
  }
  for (const char* name : {"CUDAL1_API_KEY", "CUDAL1_SERVE_TOKEN", "OPENAI_API_KEY", "https_proxy",
                           "SOME_OTHER_SETTING"})
    ::unsetenv(name);
}

TEST(SandboxArguments, NamespacesMountsAndTheUserSwitch) {
  SandboxSupport root;
  root.mode = SandboxSupport::Mode::kRootUser;
  root.bwrap = "/usr/bin/bwrap";
  root.setpriv = "/usr/bin/setpriv";
  SandboxView view;
  view.user = SandboxUser{1234567, 1234567};
  view.mounts.push_back({SandboxMount::Access::kReadOnly, "/data/copy.py", "/home/u/task.py"});
  view.mounts.push_back({SandboxMount::Access::kWritable, "/cache/ext", {}});
  view.mounts.push_back({SandboxMount::Access::kDevice, "/dev/nvidia0", {}});
  const auto argv = sandbox_argv(root, view, {"/opt/worker", "serve"});
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv.front(), "/usr/bin/bwrap");
  for (const char* flag :
       {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session"})
    EXPECT_TRUE(has(argv, flag)) << flag;
  // The copy is seen at the task's own path, read-only; the device node as a device.
  const auto at = std::find(argv.begin(), argv.end(), "/data/copy.py");
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at - 1), "--ro-bind");
  EXPECT_EQ(*(at + 1), "/home/u/task.py");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "/cache/ext") - 1), "--bind");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "/dev/nvidia0") - 1), "--dev-bind");
  // Root mode: the command runs as the sandbox's own user, through setpriv, last.
  const auto setpriv = std::find(argv.begin(), argv.end(), "/usr/bin/setpriv");
  ASSERT_NE(setpriv, argv.end());
  EXPECT_TRUE(has(argv, "1234567"));
  EXPECT_TRUE(has(argv, "--bounding-set=-all"));
  EXPECT_EQ(argv[argv.size() - 2], "/opt/worker");
  EXPECT_EQ(argv.back(), "serve");
  // Nothing of the host's files is mounted but the system's and what the view names.
  for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] != "--ro-bind" && argv[i] != "--bind" && argv[i] != "--dev-bind") continue;
    const std::string source = argv[i + 1];
    const bool named =
        source == "/data/copy.py" || source == "/cache/ext" || source == "/dev/nvidia0";
    const bool system = source == "/usr" || source == "/sys" || source.rfind("/etc/", 0) == 0 ||
                        source.rfind("/lib", 0) == 0 || source == "/bin" || source == "/sbin";
    EXPECT_TRUE(named || system) << source;
  }
}

TEST(SandboxUsers, EverySandboxGetsAUserOfItsOwn) {
  const SandboxUser a = next_sandbox_user();
  const SandboxUser b = next_sandbox_user();
  EXPECT_NE(a.uid, b.uid);
  EXPECT_GE(a.uid, 1u << 30);
  EXPECT_EQ(a.uid, a.gid);
}

TEST(SandboxPolicyNames, ParsesAndRefuses) {
  EXPECT_EQ(parse_sandbox_policy("auto"), SandboxPolicy::kAuto);
  EXPECT_EQ(parse_sandbox_policy("on"), SandboxPolicy::kOn);
  EXPECT_EQ(parse_sandbox_policy("off"), SandboxPolicy::kOff);
  EXPECT_THROW(parse_sandbox_policy("yes"), std::exception);
}

// The process tree: what left the group is still found, measured and killed.
TEST(ProcessTree, KillReachesDescendantsInSessionsOfTheirOwn) {
  const auto dir = sandbox_scratch("tree");
  const auto pid_file = dir / "pid";
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "setsid sh -c 'echo $$ > " + pid_file.string() + "; exec sleep 300' & sleep 300"};
  auto child = ChildProcess::spawn(spec);
  const std::string line = wait_for_line(pid_file);
  ASSERT_FALSE(line.empty());
  const pid_t escaped = std::stoi(line);
  EXPECT_TRUE(alive(escaped));
  child->kill_group();
  for (int i = 0; i < 100 && alive(escaped); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(escaped));
  fs::remove_all(dir);
}

TEST(ProcessTree, CountsMemoryAndCpuOfDescendants) {
  ProcessSpec spec;
  // A detached child holds 200 MB and burns CPU: both count for the tree.
  spec.argv = {"/usr/bin/python3", "-c",
               "import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    block = bytearray(200 << 20)\n"
               "    for i in range(0, len(block), 4096): block[i] = 1\n"
               "    end = time.time() + 60\n"
               "    while time.time() < end: pass\n"
               "time.sleep(60)\n"};
  auto child = ChildProcess::spawn(spec);
  std::uint64_t resident = 0;
  for (int i = 0; i < 200 && resident < (180ull << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    resident = child->group_usage().resident_bytes;
  }
  EXPECT_GE(resident, 180ull << 20);
  double cpu = 0;
  for (int i = 0; i < 100 && cpu < 0.2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cpu = child->group_usage().cpu_seconds;
  }
  EXPECT_GE(cpu, 0.2);
  child->kill_group();
}

TEST(ProcessTree, PauseStopsDescendantsInSessionsOfTheirOwn) {
  const auto dir = sandbox_scratch("pause");
  const auto counter = dir / "count";
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "setsid sh -c 'while :; do echo x >> " + counter.string() +
                   "; sleep 0.01; done' & sleep 300"};
  auto child = ChildProcess::spawn(spec);
  for (int i = 0; i < 200 && read_file(counter).size() < 10; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  child->set_group_running(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto paused = read_file(counter).size();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(read_file(counter).size(), paused);
  child->set_group_running(true);
  for (int i = 0; i < 100 && read_file(counter).size() == paused; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GT(read_file(counter).size(), paused);
  child->kill_group();
  fs::remove_all(dir);
}

TEST(ProcessLimitsTest, FileSizeAndEnvironmentAndDirectory) {
  const auto dir = sandbox_scratch("limits");
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "pwd > where; echo \"[$SECRET_SETTING][$KEPT]\" > env; "
               "head -c 100000 /dev/zero > big; echo $? > big.status"};
  spec.working_directory = dir;
  spec.inherit_environment = false;
  spec.environment = {{"KEPT", "yes"}, {"PATH", "/usr/bin:/bin"}};
  spec.limits.file_bytes = 4096;
  ::setenv("SECRET_SETTING", "leaked", 1);
  auto child = ChildProcess::spawn(spec);
  ASSERT_TRUE(child->wait_or_kill(30));
  ::unsetenv("SECRET_SETTING");
  EXPECT_EQ(read_file(dir / "where"), dir.string() + "\n");
  EXPECT_EQ(read_file(dir / "env"), "[][yes]\n");
  EXPECT_LE(fs::file_size(dir / "big"), 4096u);
  fs::remove_all(dir);
}

// A real sandbox, where this machine can make one (CI installs bubblewrap).
TEST(SandboxRun, SeesOnlyItsOwnProcessesAndNamedFiles) {
  const SandboxSupport& support = SandboxSupport::probe();
  if (!support.available()) GTEST_SKIP() << support.describe();
  const auto dir = sandbox_scratch("run");
  const auto visible = dir / "visible.txt";
  const auto hidden = dir / "hidden.txt";
  std::ofstream(visible) << "seen\n";
  std::ofstream(hidden) << "not seen\n";
  const auto out = dir / "out.txt";
  SandboxView view;
  if (support.mode == SandboxSupport::Mode::kRootUser) view.user = next_sandbox_user();
  view.mounts.push_back({SandboxMount::Access::kReadOnly, visible, {}});
  ProcessSpec spec;
  spec.argv = sandbox_argv(
      support, view,
      {"/bin/sh", "-c",
       "ls /proc | grep -c '^[0-9]' ; cat " + visible.string() + "; cat " + hidden.string() +
           " 2>/dev/null || echo no-hidden; echo x >> " + visible.string() +
           " 2>/dev/null || echo read-only; ls /root 2>/dev/null | head -1; echo done"});
  spec.inherit_environment = false;
  spec.environment = allowlisted_environment({});
  spec.stdout_file = out;
  auto child = ChildProcess::spawn(spec);
  const auto status = child->wait_or_kill(60);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->code, 0) << read_file(out);
  const std::string text = read_file(out);
  std::istringstream lines(text);
  std::string count;
  std::getline(lines, count);
  // bwrap's init, the shell, ls and grep: a handful, not the host's hundreds.
  EXPECT_LE(std::stoi(count), 6) << text;
  EXPECT_NE(text.find("seen\n"), std::string::npos) << text;
  EXPECT_NE(text.find("no-hidden"), std::string::npos) << text;
  EXPECT_NE(text.find("read-only"), std::string::npos) << text;
  EXPECT_NE(text.find("done"), std::string::npos) << text;
  EXPECT_EQ(read_file(visible), "seen\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cudal1

namespace cudal1 {
namespace {

// cgroup v2 limits, where this machine gives them (the GPU machines; not the CI VM).
TEST(Cgroup, MemoryAndProcessLimitsHoldForEveryProcessOfTheGroup) {
  const CgroupSupport& support = CgroupSupport::probe();
  if (!support.available()) {
    EXPECT_FALSE(support.why_unavailable.empty());
    GTEST_SKIP() << support.why_unavailable;
  }
  std::filesystem::path path;
  {
    CgroupScope scope(support, 64ull << 20, 16);
    path = scope.path();
    ASSERT_TRUE(std::filesystem::exists(path));
    ProcessSpec spec;
    // A detached child takes 200 MB: the kernel ends it at the group's 64 MiB.
    spec.argv = {"/usr/bin/python3", "-c",
                 "import os, subprocess, sys\n"
                 "subprocess.run([sys.executable, '-c', 'b = bytearray(200 << 20); "
                 "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]'], "
                 "start_new_session=True)\n"};
    spec.cgroup_procs = scope.procs_file();
    auto child = ChildProcess::spawn(spec);
    ASSERT_TRUE(child->wait_or_kill(60));
    EXPECT_GE(scope.oom_kills(), 1u);
    // More processes than pids.max cannot be started.
    ProcessSpec many;
    many.argv = {"/bin/sh", "-c",
                 "n=0; for i in $(seq 40); do sleep 5 & n=$((n+1)); done; wait; echo $n"};
    many.cgroup_procs = scope.procs_file();
    auto forks = ChildProcess::spawn(many);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::ifstream procs(path / "cgroup.procs");
    int count = 0;
    for (std::string line; std::getline(procs, line);) ++count;
    EXPECT_LE(count, 16);
    scope.kill();
    forks->wait_or_kill(10);
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // removed with its scope
}

}  // namespace
}  // namespace cudal1

namespace cudal1 {
namespace {

TEST(ProcessTree, FindsAProcessByItsPidInItsOwnNamespace) {
  ProcessSpec spec;
  spec.argv = {"/bin/sleep", "300"};
  auto child = ChildProcess::spawn(spec);
  // Outside any PID namespace of its own, its innermost pid is the one cudal1 sees.
  EXPECT_EQ(find_in_tree(child->pid(), child->pid()), child->pid());
  EXPECT_EQ(find_in_tree(child->pid(), child->pid(), ::getpid()), child->pid());
  EXPECT_FALSE(find_in_tree(child->pid(), child->pid(), child->pid()).has_value());
  child->kill_group();
}

// A zygote's fork: another process is its parent and reports its end; killing it waits for that
// report, and the process's folder goes when the object does.
TEST(ProcessTree, AdoptedProcessIsKilledAndReportedByItsParent) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  bool gone = false;
  auto adopted = ChildProcess::adopt(
      pid, -1, -1,
      [pid]() -> std::optional<ExitStatus> {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
        return WIFSIGNALED(status) ? ExitStatus{true, 0, WTERMSIG(status)}
                                   : ExitStatus{false, WEXITSTATUS(status), 0};
      },
      [&gone] { gone = true; });
  EXPECT_FALSE(adopted->poll_exit().has_value());
  const ExitStatus status = adopted->kill_group();
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_FALSE(alive(pid));
  adopted.reset();
  EXPECT_TRUE(gone);
}

// One GPU of several: the driver's folder of GPUs is hidden and only the assigned GPU's entry
// is mounted back inside it (worker_sandbox's mount_gpu). The hidden folder stays read-only.
TEST(SandboxRun, AHiddenFolderShowsOnlyWhatIsMountedInsideIt) {
  const SandboxSupport& support = SandboxSupport::probe();
  if (!support.available()) GTEST_SKIP() << support.describe();
  const auto dir = sandbox_scratch("hidden");
  fs::create_directories(dir / "gpus" / "a");
  fs::create_directories(dir / "gpus" / "b");
  std::ofstream(dir / "gpus" / "a" / "information") << "gpu a\n";
  std::ofstream(dir / "gpus" / "b" / "information") << "gpu b\n";
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  const auto out = dir / "out.txt";
  SandboxView view;
  if (support.mode == SandboxSupport::Mode::kRootUser) view.user = next_sandbox_user();
  // As /proc is for the driver's folder: a mount above the hidden one.
  view.mounts.push_back({SandboxMount::Access::kReadOnly, dir / "gpus" / "b", {}});
  view.hidden.push_back(dir / "gpus");
  view.mounts.push_back({SandboxMount::Access::kReadOnly, dir, {}});
  const std::string gpus = (dir / "gpus").string();
  ProcessSpec spec;
  spec.argv = sandbox_argv(support, view,
                           {"/bin/sh", "-c",
                            "ls " + gpus + "; cat " + gpus + "/b/information; mkdir " + gpus +
                                "/c 2>/dev/null || echo read-only; echo done"});
  spec.inherit_environment = false;
  spec.environment = allowlisted_environment({});
  spec.stdout_file = out;
  spec.log_file = dir / "log.txt";
  auto child = ChildProcess::spawn(spec);
  const auto status = child->wait_or_kill(60);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->code, 0) << read_file(out) << read_file(dir / "log.txt");
  EXPECT_EQ(read_file(out), "b\ngpu b\nread-only\ndone\n") << read_file(dir / "log.txt");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cudal1
