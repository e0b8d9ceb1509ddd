// The replies a scripted test server gives, one step per request, in order.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::test {

struct ReplyStep {
  int status = 200;
  std::map<std::string, std::string> headers;
  double delay_s = 0;
  std::optional<std::string> raw;      // sent verbatim
  std::optional<nlohmann::json> body;  // sent as JSON
  std::optional<std::string> content;  // wrapped in a chat completion ("content" or "content_file")
  std::string finish_reason = "stop";
  std::optional<std::string> match;  // the last user message must contain it
  std::optional<std::string> error;  // message of the error body of a failure status
};

class ReplyScript {
 public:
  // Reads {"replies": [step, ...], "default": step, "routes": [{"match": TEXT, "replies": [...],
  // "default": step}, ...]}; throws std::runtime_error naming the field. A request whose last
  // user message contains a route's text is answered from that route's own steps (tests that
  // prompt for many tasks at once, in any order), any other from the top-level steps.
  explicit ReplyScript(const std::filesystem::path& file);
  // The next step for a request with this last user message, or the default once the list is
  // used up; nullopt when there is none.
  std::optional<ReplyStep> next(const std::string& user_message = "");

 private:
  struct Route {
    std::string match;  // empty: the top-level steps, for every request no route matches
    std::vector<ReplyStep> replies;
    std::size_t used = 0;
    std::optional<ReplyStep> fallback;
  };
  std::mutex mutex_;
  std::vector<Route> routes_;  // the matching routes in order, then the top level
};

}  // namespace cudal1::test
