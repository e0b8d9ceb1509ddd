// Identical requests at once share one answer: trainers re-send a request whose answer took
// longer than their own time-out (OpenRLHF waits 180 s, then tries again), and the retry must
// neither start the work twice nor add its rewards to the smoothing history twice. A request
// identical to one in flight waits for it. Once answered, a request is no longer held here: its
// answer is in the store (RewardService), which answers it again, also after a restart.
#pragma once

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
  // The answer for `key`: computed by `answer` unless an identical request is in flight, whose
  // answer is then shared. `shared` tells which. An exception from `answer` reaches every
  // waiter.
  Answer answer_once(const std::string& key, const std::function<Answer()>& answer, bool& shared);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_future<Answer>> in_flight_;
};

}  // namespace cudal1::serve
