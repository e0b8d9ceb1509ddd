#include "cudal1/serve/request_replay.hpp"

namespace cudal1::serve {

Answer RequestReplay::answer_once(const std::string& key, const std::function<Answer()>& answer,
                                  bool& shared) {
  std::promise<Answer> promise;
  std::shared_future<Answer> earlier;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = in_flight_.find(key); it != in_flight_.end()) {
      earlier = it->second;
    } else {
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (earlier.valid()) {
    shared = true;
    return earlier.get();
  }
  shared = false;
  try {
    Answer result = answer();
    std::lock_guard lock(mutex_);
    promise.set_value(result);
    in_flight_.erase(key);
    return result;
  } catch (...) {
    std::lock_guard lock(mutex_);
    promise.set_exception(std::current_exception());
    in_flight_.erase(key);
    throw;
  }
}

}  // namespace cudal1::serve
