// What the files of Session (session*.cpp) share: failure replies and the error user code raises.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/worker/protocol.hpp"

namespace cudal1::worker {

namespace proto = cudal1::worker_protocol;

// A reply saying the request failed.
inline nlohmann::json failure(const std::string& status, const std::string& error,
                              const std::string& trace = {}) {
  return {{proto::reply::kOk, false},
          {proto::reply::kStatus, status},
          {proto::reply::kError, error},
          {proto::reply::kTraceback, trace}};
}

// A failure while importing or constructing user code, classified for the verdict.
struct UserCodeError {
  std::string status;
  std::string error;
  std::string trace;
};

// Adds an output's bytes to a reply; the first (often the only) one is moved, not copied.
inline void append_payload(std::vector<std::byte>& payload, std::vector<std::byte>&& bytes) {
  if (payload.empty()) {
    payload = std::move(bytes);
  } else {
    payload.insert(payload.end(), bytes.begin(), bytes.end());
  }
}

}  // namespace cudal1::worker
