// The per-client limit on requests in flight: a server (or a machine running a local command)
// is not flooded however many threads the optimizer runs.
#pragma once

#include <semaphore>
#include <stdexcept>
#include <string>

namespace cudal1::llm {

class RequestSlots {
 public:
  explicit RequestSlots(int count) : free_(checked(count)) {}

  // Holds one slot for its lifetime; the constructor waits until one is free.
  class Held {
   public:
    explicit Held(RequestSlots& slots) : slots_(slots) { slots_.free_.acquire(); }
    ~Held() { slots_.free_.release(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    RequestSlots& slots_;
  };

 private:
  static int checked(int count) {
    if (count < 1) {
      throw std::invalid_argument("LLM client concurrency must be at least 1, got " +
                                  std::to_string(count));
    }
    return count;
  }

  std::counting_semaphore<> free_;
};

}  // namespace cudal1::llm
