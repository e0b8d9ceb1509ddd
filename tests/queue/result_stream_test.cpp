// The submitter's result stream against a real redis-server of the test's own (skipped where none
// is installed): a published result reaches the evaluation that waits for it even where its
// entry id is below the last one the submitter read. Four workers on one host hit this once:
// the stream, deleted when its last result was collected, was made again within the same
// millisecond, and one verdict of an RL step never reached serve.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cudal1/queue/job_result.hpp"
#include "cudal1/queue/keys.hpp"
#include "cudal1/queue/protocol.hpp"
#include "cudal1/queue/queue_evaluator.hpp"
#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::queue {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// redis-server on a free loopback port, without persistence, stopped with the test.
class RedisServer {
 public:
  RedisServer() {
#ifdef CUDAL1_REDIS_SERVER
    for (int attempt = 0; attempt < 3 && pid_ <= 0; ++attempt) start(CUDAL1_REDIS_SERVER);
#endif
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool running() const {
    return pid_ > 0;
  }
  RedisAddress address() const {
    return parse_redis_url(url());
  }

 private:
  std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/0";
  }
  void start(const char* program) {
    port_ = free_port();
    if (port_ == 0) return;
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int quiet = ::open("/dev/null", O_WRONLY);
      ::dup2(quiet, STDOUT_FILENO);
      ::dup2(quiet, STDERR_FILENO);
      const std::string port = std::to_string(port_);
      ::execl(program, program, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--loglevel", "warning", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int k = 0; k < 100; ++k) {
      std::this_thread::sleep_for(50ms);
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return;  // it failed (the port was taken)
      try {
        ReconnectPolicy once;
        once.give_up_after_s = 0.2;
        RedisConnection probe(parse_redis_url(url()), once);
        if (probe.command({"PING"}).str() == "PONG") {
          pid_ = pid;
          return;
        }
      } catch (const std::exception&) {
      }
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  pid_t pid_ = 0;
  int port_ = 0;
};

class ResultStream : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_.running()) GTEST_SKIP() << "no redis-server here (Debian: redis-server)";
    dir_ = fs::temp_directory_path() / ("cudal1-result-stream-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "task.py") << "# a task\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  EvalRequest request(const std::string& name) {
    const fs::path candidate = dir_ / (name + ".py");
    std::ofstream(candidate) << "# candidate " << name << "\n";
    EvalRequest r;
    r.task = dir_ / "task.py";
    r.candidate = candidate;
    r.options.device = "cpu";
    return r;
  }

  QueueSettings settings() {
    QueueSettings s;
    s.address = redis_.address();
    s.submitter = "result-stream-test";
    s.lost_check_s = 0.5;
    return s;
  }

  // The job the evaluator queued for `candidate` (what a worker reads off the job stream).
  Delivery queued(RedisConnection& redis, const std::string& candidate) {
    const RedisValue entries = redis.command({"XRANGE", keys::jobs(keys::kCpu), "-", "+"});
    for (const RedisValue& entry : entries.items) {
      const std::string job = entry.items[1].field("job");
      if (job.find(candidate) == std::string::npos) continue;
      return {keys::jobs(keys::kCpu), entry.items[0].str(), entry.items[1].field("id"),
              entry.items[1].field("submitter")};
    }
    ADD_FAILURE() << "no job for " << candidate;
    return {};
  }

  static JobResult result_of(const std::string& job_id, Status status) {
    Verdict verdict;
    verdict.status = status;
    verdict.error = "set by the test";
    verdict.finalize();
    return JobResult::of_verdict(job_id, std::move(verdict));
  }

  Delivery first_collected(QueueEvaluator& evaluator, RedisConnection& redis,
                           std::future<Verdict>& second);

  RedisServer redis_;
  fs::path dir_;
};

// Two evaluations queued; the first one's result already read and collected, published under an
// id far ahead of the clock. Returns the second one's job as a worker took it.
Delivery ResultStream::first_collected(QueueEvaluator& evaluator, RedisConnection& redis,
                                       std::future<Verdict>& second) {
  std::future<Verdict> first = evaluator.submit(request("first"));
  second = evaluator.submit(request("second"));
  redis.command({"XGROUP", "CREATE", keys::jobs(keys::kCpu), keys::kGroup, "0", "MKSTREAM"});
  const Delivery one = queued(redis, "first");
  redis.command({"XADD", keys::results(one.submitter), "99999999999999-0", "id", one.job_id,
                 "result", result_of(one.job_id, Status::kIncorrect).to_json().dump()});
  EXPECT_EQ(first.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(first.get().status, Status::kIncorrect);
  return queued(redis, "second");
}

TEST_F(ResultStream, AResultBelowTheLastIdReadStillArrives) {
  QueueEvaluator evaluator(settings());
  RedisConnection redis(redis_.address());
  std::future<Verdict> second;
  const Delivery two = first_collected(evaluator, redis, second);
  // The stream goes (as an expiry or a restart takes it) and the second result comes through
  // the workers' own script under today's clock, an id below the one read last.
  redis.command({"DEL", keys::results(two.submitter)});
  ASSERT_EQ(publish_result(redis, two, result_of(two.job_id, Status::kRuntimeError), "worker"),
            PublishOutcome::kPublished);
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready) << "a published result was never read";
  EXPECT_EQ(second.get().status, Status::kRuntimeError);
}

TEST_F(ResultStream, CollectingTheLastResultKeepsTheStreamsIds) {
  // With the stream kept, the next id Redis gives is above every id read before, so XREAD from
  // the last one read sees it at once, whatever the clock says.
  QueueEvaluator evaluator(settings());
  RedisConnection redis(redis_.address());
  std::future<Verdict> second;
  const Delivery two = first_collected(evaluator, redis, second);
  EXPECT_EQ(redis.command({"EXISTS", keys::results(two.submitter)}).integer, 1);
  ASSERT_EQ(publish_result(redis, two, result_of(two.job_id, Status::kRuntimeError), "worker"),
            PublishOutcome::kPublished);
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(second.get().status, Status::kRuntimeError);
}

}  // namespace
}  // namespace cudal1::queue
