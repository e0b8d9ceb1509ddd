#include "cudal1/serve/task_fair_queue.hpp"

#include <stdexcept>

namespace cudal1::serve {

void TaskFairQueue::push(std::string task, Job job) {
  queued_.emplace_back(std::move(task), std::move(job));
}

std::pair<std::string, TaskFairQueue::Job> TaskFairQueue::take() {
  if (queued_.empty()) throw std::logic_error("TaskFairQueue::take on an empty queue");
  auto best = queued_.begin();
  std::size_t fewest = running(best->first);
  for (auto it = std::next(best); by_task_ && it != queued_.end() && fewest > 0; ++it) {
    const std::size_t n = running(it->first);
    if (n < fewest) {
      best = it;
      fewest = n;
    }
  }
  std::pair<std::string, Job> job = std::move(*best);
  queued_.erase(best);
  ++running_[job.first];
  return job;
}

void TaskFairQueue::done(const std::string& task) {
  const auto it = running_.find(task);
  if (it == running_.end()) throw std::logic_error("TaskFairQueue::done for a task not running");
  if (--it->second == 0) running_.erase(it);
}

std::size_t TaskFairQueue::running() const {
  std::size_t total = 0;
  for (const auto& [task, count] : running_) total += count;
  return total;
}

std::size_t TaskFairQueue::running(const std::string& task) const {
  const auto it = running_.find(task);
  return it == running_.end() ? 0 : it->second;
}

}  // namespace cudal1::serve
