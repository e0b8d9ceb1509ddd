// The order in which cudal1 serve starts queued evaluations: a job of the task with the fewest
// evaluations running goes first, the earliest queued of those. A GRPO step sends a task's group
// of samples together; started in arrival order, all of a group would run at once, each with a
// reference worker of its own. Spread across tasks, a task's later samples start when its
// earlier ones have given their reference workers back, and take them (kept references,
// docs/evaluation.md). Not thread-safe: its owner's mutex guards it.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace cudal1::serve {

class TaskFairQueue {
 public:
  using Job = std::function<void()>;

  // by_task false: the earliest queued job first, whatever its task (arrival order).
  explicit TaskFairQueue(bool by_task = true) : by_task_(by_task) {}

  void push(std::string task, Job job);
  // The next job and its task, counted as running until done(task). The queue must not be empty.
  std::pair<std::string, Job> take();
  void done(const std::string& task);

  bool empty() const { return queued_.empty(); }
  std::size_t queued() const { return queued_.size(); }
  std::size_t running() const;  // of every task
  std::size_t running(const std::string& task) const;

 private:
  std::deque<std::pair<std::string, Job>> queued_;
  std::map<std::string, std::size_t> running_;  // tasks with a job running
  bool by_task_;
};

}  // namespace cudal1::serve
