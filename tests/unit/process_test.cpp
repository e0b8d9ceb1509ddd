#include "cudal1/common/process.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/cpu_priority.hpp"
#include "cudal1/common/file_lock.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/proc_tree.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/build_cache.hpp"
#include "cudal1/eval/device_lock.hpp"
#include "cudal1/eval/worker_client.hpp"
#include "process_probe.hpp"

namespace cudal1 {
namespace {

using test_support::alive;

std::filesystem::path scratch(const std::string& name) {
  return test_support::scratch("cudal1-test-", name);
}

ProcessSpec shell(const std::string& script, const std::filesystem::path& log = {}) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.log_file = log;
  return spec;
}

TEST(Process, ReportsExitCodesAndSignals) {
  auto ok = ChildProcess::spawn(shell("exit 3"));
  const auto status = ok->wait_or_kill(10);
  ASSERT_TRUE(status);
  EXPECT_FALSE(status->signaled);
  EXPECT_EQ(status->code, 3);
  auto crash = ChildProcess::spawn(shell("kill -SEGV $$"));
  const auto crashed = crash->wait_or_kill(10);
  ASSERT_TRUE(crashed);
  EXPECT_TRUE(crashed->signaled);
  EXPECT_EQ(crashed->signal, SIGSEGV);
  EXPECT_NE(crashed->describe().find("signal 11"), std::string::npos);
}

TEST(Process, TimeoutKillsTheWholeGroup) {
  const auto dir = scratch("group");
  const auto pid_file = dir / "grandchild.pid";
  // The grandchild would outlive a kill of the direct child alone.
  auto child = ChildProcess::spawn(shell("sleep 60 & echo $! > " + pid_file.string() + "; wait"));
  for (int i = 0; i < 200 && !std::filesystem::exists(pid_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(child->wait_or_kill(0.2));
  const pid_t grandchild = std::stoi(read_file(pid_file));
  for (int i = 0; i < 100 && alive(grandchild); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(alive(grandchild)) << "grandchild survived";
  std::filesystem::remove_all(dir);
}

TEST(Process, OutputGoesToTheLogAndCaptureReturnsStdout) {
  const auto dir = scratch("log");
  ProcessSpec spec = shell("echo to-stdout; echo to-stderr >&2", dir / "log.txt");
  EXPECT_EQ(run_and_capture(spec, 10), "to-stdout\n");
  EXPECT_NE(read_file(dir / "log.txt").find("to-stderr"), std::string::npos);
  EXPECT_THROW(run_and_capture(shell("exit 1"), 10), std::runtime_error);
  EXPECT_THROW(run_and_capture(shell("sleep 30"), 0.3), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(Process, MeasuresGroupMemory) {
  // python-free: dd holds a 64 MiB buffer while copying from /dev/zero to /dev/null.
  auto child = ChildProcess::spawn(shell("exec dd if=/dev/zero of=/dev/null bs=64M count=1000000"));
  std::uint64_t peak = 0;
  for (int i = 0; i < 100 && peak < (64u << 20); ++i) {
    peak = std::max(peak, child->group_usage().resident_bytes);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(peak, 64u << 20);
  child->kill_group();
}

TEST(Process, AStoppedGroupRunsNothingUntilItIsContinued) {
  const auto dir = scratch("stop");
  const auto pid_file = dir / "grandchild.pid";
  const auto ticks = dir / "ticks";
  // A grandchild that writes a line every 10 ms: stopping the group must stop it too.
  auto child =
      ChildProcess::spawn(shell("(while :; do echo x >> " + ticks.string() +
                                "; sleep 0.01; done) & echo $! > " + pid_file.string() + "; wait"));
  for (int i = 0; i < 200 && !std::filesystem::exists(pid_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  child->set_group_running(false);
  // A stopped process writes nothing more (one caught inside a write finishes it): wait for the
  // file to stop growing, then watch it stay put. Running, it grows every 10 ms.
  std::size_t stopped_at = read_file(ticks).size();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::size_t now = read_file(ticks).size();
    if (now == stopped_at) break;
    stopped_at = now;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(read_file(ticks).size(), stopped_at) << "the stopped group kept writing";
  EXPECT_FALSE(child->poll_exit());  // stopped is not exited
  child->set_group_running(true);
  for (int i = 0; i < 500 && read_file(ticks).size() == stopped_at; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(read_file(ticks).size(), stopped_at) << "the group did not continue";
  child->kill_group();
  std::filesystem::remove_all(dir);
}

TEST(Process, EnvironmentOverridesAreApplied) {
  ProcessSpec spec = shell("printf %s \"$CUDAL1_TEST_VALUE\"");
  spec.environment["CUDAL1_TEST_VALUE"] = "forty-two";
  EXPECT_EQ(run_and_capture(spec, 10), "forty-two");
}

TEST(Process, StdinComesFromTheInputFileOrIsEmpty) {
  const auto dir = scratch("stdin");
  { std::ofstream(dir / "input.txt") << "prompt text\nsecond line"; }
  ProcessSpec spec = shell("cat");
  spec.stdin_file = dir / "input.txt";
  EXPECT_EQ(run_and_capture(spec, 10), "prompt text\nsecond line");
  EXPECT_EQ(run_and_capture(shell("cat"), 10), "") << "without stdin_file, stdin is /dev/null";
  ProcessSpec missing = shell("cat");
  missing.stdin_file = dir / "missing.txt";
  EXPECT_THROW(ChildProcess::spawn(missing), std::system_error);
  std::filesystem::remove_all(dir);
}

TEST(Process, ALowerPriorityReachesTheProcessItsChildrenAndItsOwnSessionsGroup) {
  // As a build starts: a session of its own, then nice 10; its compiler is a child.
  ProcessSpec spec = shell(
      "cat /proc/self/autogroup 2>/dev/null || echo none; "
      "sh -c 'ps -o ni= -p $$' 2>/dev/null || echo unknown");
  spec.nice = 10;
  const std::optional<int> ours_before = autogroup_nice();
  const std::string out = run_and_capture(spec, 30);
  if (out.find("unknown") == std::string::npos) {
    EXPECT_NE(out.find("10\n"), std::string::npos) << out;
  }
  if (out.rfind("none", 0) != 0) {
    EXPECT_NE(out.find(" nice 10\n"), std::string::npos) << out;
  }
  // Not this process's group: the child's session was its own when it changed it.
  EXPECT_EQ(autogroup_nice(), ours_before);
}

TEST(UsableCores, ACgroupQuotaIsReadAsWholeCoresRoundedUp) {
  EXPECT_EQ(cores_of_cpu_max("200000 100000\n"), 2u);
  EXPECT_EQ(cores_of_cpu_max("150000 100000"), 2u);
  EXPECT_EQ(cores_of_cpu_max("50000 100000"), 1u);
  EXPECT_EQ(cores_of_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(cores_of_cpu_max(""), std::nullopt);
  EXPECT_EQ(cores_of_cpu_max("100000 0"), std::nullopt);
  EXPECT_EQ(cores_of_cpu_max("12x 100000"), std::nullopt);
}

TEST(UsableCores, AProcessPinnedToOneCoreCountsOne) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_GE(count_usable_cores(), 1u);
  EXPECT_LE(count_usable_cores(), static_cast<unsigned>(CPU_COUNT(&all)));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int first = 0;
    while (!CPU_ISSET(first, &all)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (::sched_setaffinity(0, sizeof(one), &one) != 0) ::_exit(100);
    ::_exit(static_cast<int>(count_usable_cores()));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
}
TEST(ProcTree, ReadsAStatLineWhoseNameHoldsSpacesAndParentheses) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_NAME, "a) b (c", 0, 0, 0);
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  const auto stat = read_stat(std::to_string(child).c_str());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->pid, child);
  EXPECT_EQ(stat->ppid, ::getpid());
  EXPECT_GT(stat->rss_pages, 0);
  EXPECT_FALSE(read_stat("999999999").has_value()) << "a process that is gone reads as null";
}

TEST(ProcTree, ARecentTreeStartsAtTheRootAndSeesANewChildAtAgeZero) {
  const auto hour = std::chrono::hours(1);
  const auto before = recent_process_tree(::getpid(), hour);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.front().pid, ::getpid()) << "the root comes first";
  auto child = ChildProcess::spawn(shell("sleep 30"));
  const auto has_child = [&](const std::vector<ProcStat>& tree) {
    for (const auto& p : tree)
      if (p.pid == child->pid()) return true;
    return false;
  };
  // (Within the hour a reading may be the first one where the kernel lists no children.)
  EXPECT_TRUE(has_child(process_tree(::getpid())));
  EXPECT_TRUE(has_child(recent_process_tree(::getpid(), std::chrono::milliseconds(0))));
  child->kill_group();
}

TEST(ProcTree, TheKernelsChildListsGiveTheTreeAScanGives) {
  // Below the shell: a child, one in a session of its own, and a shell with its own child.
  auto root =
      ChildProcess::spawn(shell("sleep 30 & setsid sleep 30 & sh -c 'sleep 30; true' & wait"));
  const auto pids = [](const std::vector<ProcStat>& tree) {
    std::set<pid_t> out;
    for (const auto& p : tree) out.insert(p.pid);
    return out;
  };
  std::vector<ProcStat> tree;
  for (int k = 0; k < 250 && (tree = process_tree(root->pid())).size() < 5; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(tree.size(), 5u);
  EXPECT_EQ(tree.front().pid, root->pid());
  EXPECT_EQ(pids(tree), pids(scanned_process_tree(root->pid())));
  for (const auto& p : tree) EXPECT_TRUE(p.pid == root->pid() || p.ppid != 1) << p.pid;
  root->kill_group();
  EXPECT_TRUE(process_tree(root->pid()).empty()) << "a process that is gone has no tree";

  // A child made on another thread is listed under that thread, and found all the same.
  std::promise<pid_t> spawned;
  std::promise<void> checked;
  std::thread other([&] {
    auto child = ChildProcess::spawn(shell("sleep 30"));
    spawned.set_value(child->pid());
    checked.get_future().wait();
    child->kill_group();
  });
  const pid_t child = spawned.get_future().get();
  EXPECT_EQ(pids(process_tree(::getpid())).count(child), 1u);
  checked.set_value();
  other.join();
}

TEST(Paths, AFolderCopyKeepsLinksAsLinksAndTimesAndReplacesTheTarget) {
  namespace fs = std::filesystem;
  const auto dir = scratch("copy");
  const fs::path from = dir / "from", to = dir / "to";
  fs::create_directories(from / "sub");
  { std::ofstream(from / "sub" / "main.o") << "object"; }
  const auto old_time = fs::last_write_time(from / "sub" / "main.o") - std::chrono::hours(5);
  fs::last_write_time(from / "sub" / "main.o", old_time);
  { std::ofstream(dir / "secret") << "outside"; }
  fs::create_symlink(dir / "secret", from / "link");  // a build's link out of its folder
  fs::create_directories(to);
  { std::ofstream(to / "stale") << "an earlier build's"; }
  copy_folder_keeping_times(from, to);
  EXPECT_FALSE(fs::exists(to / "stale"));
  EXPECT_EQ(read_file(to / "sub" / "main.o"), "object");
  EXPECT_EQ(fs::last_write_time(to / "sub" / "main.o"), old_time);
  ASSERT_TRUE(fs::is_symlink(fs::symlink_status(to / "link")))
      << "copied as a link, not its target";
  EXPECT_EQ(fs::read_symlink(to / "link"), dir / "secret");
  fs::remove_all(dir);
}

TEST(Lock, ExcludesOtherProcesses) {
  const auto dir = scratch("lock");
  FileLock held = lock_device(dir, "GPU-1234");
  // A child process must not get the lock while we hold it, and must get it once we release.
  const std::string probe = "flock -n " + device_lock_path(dir, "GPU-1234").string() + " true";
  auto blocked = ChildProcess::spawn(shell(probe));
  const auto while_held = blocked->wait_or_kill(10);
  ASSERT_TRUE(while_held);
  EXPECT_NE(while_held->code, 0);
  held.release();
  auto free = ChildProcess::spawn(shell(probe));
  const auto after_release = free->wait_or_kill(10);
  ASSERT_TRUE(after_release);
  EXPECT_EQ(after_release->code, 0);
  std::filesystem::remove_all(dir);
}

TEST(Lock, SerialisesThreadsOfOneProcess) {
  const auto dir = scratch("threads");
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        FileLock lock = lock_device(dir, "cpu");
        most = std::max(most.load(), ++inside);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
  std::filesystem::remove_all(dir);
}

TEST(Lock, SharedUsersRunTogetherButNeverBesideExclusiveUse) {
  const auto dir = scratch("shared");
  std::atomic<int> shared_inside{0}, exclusive_inside{0}, most_shared{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        if ((t + i) % 3 == 0) {
          FileLock lock = lock_device(dir, "cpu", DeviceUse::kExclusive);
          ++exclusive_inside;
          if (shared_inside.load() > 0 || exclusive_inside.load() > 1) overlap = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(3));
          --exclusive_inside;
        } else {
          FileLock lock = lock_device(dir, "cpu", DeviceUse::kShared);
          const int now = ++shared_inside;
          most_shared = std::max(most_shared.load(), now);
          if (exclusive_inside.load() > 0) overlap = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(3));
          --shared_inside;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load()) << "a shared user ran beside an exclusive one";
  // Two shared holders at once, deterministically: the second must not wait for the first.
  FileLock first = lock_device(dir, "GPU-9", DeviceUse::kShared);
  auto second =
      std::async(std::launch::async, [&] { return lock_device(dir, "GPU-9", DeviceUse::kShared); });
  EXPECT_EQ(second.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  // While both are held, exclusive use waits.
  auto exclusive = std::async(std::launch::async,
                              [&] { return lock_device(dir, "GPU-9", DeviceUse::kExclusive); });
  EXPECT_EQ(exclusive.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  first.release();
  FileLock second_lock = second.get();
  second_lock.release();
  EXPECT_EQ(exclusive.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::filesystem::remove_all(dir);
}

// A shared hold that lasts (a compilation inside a first call) does not keep the shared users
// queued behind a waiting timing phase waiting too: they run beside it, and the timing phase
// still gets the device alone once all of them are done.
TEST(Lock, LongSharedHoldLetsQueuedSharedUsersPassAWaitingExclusiveOne) {
  using namespace std::chrono;
  const auto dir = scratch("let-through");
  const auto every = milliseconds(200);
  std::optional<FileLock> long_hold = lock_device(dir, "GPU-7", DeviceUse::kShared, every);
  std::atomic<bool> long_hold_done{false};
  auto exclusive = std::async(std::launch::async, [&] {
    FileLock lock = lock_device(dir, "GPU-7", DeviceUse::kExclusive, every);
    return long_hold_done.load();
  });
  std::this_thread::sleep_for(milliseconds(100));  // the exclusive request waits at the device
  auto later_shared = std::async(std::launch::async, [&] {
    FileLock lock = lock_device(dir, "GPU-7", DeviceUse::kShared, every);
    return true;
  });
  // It passes while the long hold is still in place (every 200 ms the turnstile opens).
  EXPECT_EQ(later_shared.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_EQ(exclusive.wait_for(milliseconds(300)), std::future_status::timeout);
  long_hold_done = true;
  long_hold.reset();
  ASSERT_EQ(exclusive.wait_for(seconds(20)), std::future_status::ready);
  EXPECT_TRUE(exclusive.get()) << "exclusive use began while the shared hold was in place";
  std::filesystem::remove_all(dir);
}

TEST(BuildCache, KeysAreContentAddressed) {
  const auto dir = scratch("cache");
  const BuildCache cache(dir);
  const auto key = cache.key("source A", "toolchain 1");
  EXPECT_EQ(key, cache.key("source A", "toolchain 1"));
  EXPECT_NE(key, cache.key("source B", "toolchain 1"));
  EXPECT_NE(key, cache.key("source A", "toolchain 2"));
  EXPECT_FALSE(cache.lookup(key));
  cache.store(key, {false, "error: expected ';'", "log text", 12.5, {}});
  const auto record = cache.lookup(key);
  ASSERT_TRUE(record);
  EXPECT_FALSE(record->ok);
  EXPECT_EQ(record->error, "error: expected ';'");
  EXPECT_EQ(record->seconds, 12.5);
  EXPECT_TRUE(record->construction.is_null());
  // What constructing the model built travels with the record.
  const nlohmann::json construction = {{"built", {"ext.so"}}, {"failed", {"bad"}}, {"error", ""}};
  cache.store(key, {true, "", "", 3.0, construction});
  EXPECT_EQ(cache.lookup(key)->construction, construction);
  EXPECT_TRUE(cache.extensions_dir(key).string().find(key) != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(WorkerCpuLedger, SumsReportsByRoleAndOperation) {
  WorkerCpuLedger ledger;
  EXPECT_TRUE(ledger.to_json().empty());
  ledger.add("candidate", {{"by_op", {{"start", 0.5}, {"load", 2.0}, {"trial", 1.25}}},
                           {"between", 0.25},
                           {"children_cpu_s", 0.0}});
  ledger.add("candidate",
             {{"by_op", {{"start", 0.5}, {"load", 1.0}, {"sample", "x"}}}, {"between", 0.5}});
  ledger.add("reference", nlohmann::json::object());  // a worker that said nothing still counts
  const nlohmann::json out = ledger.to_json();
  EXPECT_EQ(out["candidate"]["workers"], 2);
  EXPECT_DOUBLE_EQ(out["candidate"]["start"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(out["candidate"]["load"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(out["candidate"]["trial"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(out["candidate"]["between"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(out["candidate"]["children"].get<double>(), 0.0);
  EXPECT_FALSE(out["candidate"].contains("sample"));  // not a number: left out
  EXPECT_EQ(out["reference"]["workers"], 1);
}

}  // namespace
}  // namespace cudal1
