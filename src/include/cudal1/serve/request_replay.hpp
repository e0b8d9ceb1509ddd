// Identical requests share one answer: trainers re-send a request whose answer took longer than
// their own time-out (OpenRLHF waits 180 s, then tries again), and the retry must neither start
// the work twice nor add its rewards to the smoothing history twice. A request identical to one
// in flight waits for it; one identical to a request answered within `keep_seconds` gets the
// same answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>

namespace cudal1::serve {

struct Answer {
  int status = 200;
  std::string body;
};

class RequestReplay {
 public:
  explicit RequestReplay(double keep_seconds, std::size_t max_kept = 256);

  // The answer for `key`: computed by `answer` when no identical request is in flight or kept,
  // else the shared one. `replayed` tells which. An exception from `answer` reaches every
  // waiter and nothing is kept. Only answers with status 200 are kept.
  Answer answer_once(const std::string& key, const std::function<Answer()>& answer, bool& replayed);

 private:
  struct Entry {
    std::shared_future<Answer> answer;
    std::chrono::steady_clock::time_point finished{};
    bool done = false;
  };
  void forget_old(std::chrono::steady_clock::time_point now);

  std::chrono::duration<double> keep_;
  std::size_t max_kept_;
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace cudal1::serve
