#include "cudal1/serve/request_replay.hpp"

#include <algorithm>
#include <vector>

namespace cudal1::serve {

RequestReplay::RequestReplay(double keep_seconds, std::size_t max_kept)
    : keep_(keep_seconds), max_kept_(max_kept) {}

void RequestReplay::forget_old(std::chrono::steady_clock::time_point now) {
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> done;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.done && now - it->second.finished > keep_) {
      it = entries_.erase(it);
      continue;
    }
    if (it->second.done) done.emplace_back(it->second.finished, it->first);
    ++it;
  }
  // Beyond max_kept answers, the oldest go first.
  if (done.size() <= max_kept_) return;
  std::sort(done.begin(), done.end());
  for (std::size_t i = 0; i < done.size() - max_kept_; ++i) entries_.erase(done[i].second);
}

Answer RequestReplay::answer_once(const std::string& key, const std::function<Answer()>& answer,
                                  bool& replayed) {
  std::promise<Answer> promise;
  std::shared_future<Answer> earlier;
  {
    std::lock_guard lock(mutex_);
    forget_old(std::chrono::steady_clock::now());
    if (const auto it = entries_.find(key); it != entries_.end()) {
      earlier = it->second.answer;
    } else {
      entries_[key].answer = promise.get_future().share();
    }
  }
  if (earlier.valid()) {
    replayed = true;
    return earlier.get();
  }
  replayed = false;
  try {
    Answer result = answer();
    std::lock_guard lock(mutex_);
    promise.set_value(result);
    auto& entry = entries_[key];
    if (result.status == 200) {
      entry.done = true;
      entry.finished = std::chrono::steady_clock::now();
    } else {
      entries_.erase(key);
    }
    return result;
  } catch (...) {
    std::lock_guard lock(mutex_);
    promise.set_exception(std::current_exception());
    entries_.erase(key);
    throw;
  }
}

}  // namespace cudal1::serve
