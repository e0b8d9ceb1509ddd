#include <cstdlib>
#include <stdexcept>

#include "command_client.hpp"
#include "cudal1/llm/client.hpp"
#include "http_client.hpp"

namespace cudal1::llm {
namespace {

constexpr const char* kAcceptedForms =
    "expected an OpenAI-compatible base URL (http://HOST:PORT/v1 or https://...) or "
    "cmd:COMMAND (the prompt on the command's stdin, the reply on its stdout)";

bool starts_with(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

std::unique_ptr<LlmClient> make_client(const std::string& spec, ClientOptions options) {
  if (options.api_key.empty()) {
    if (const char* key = std::getenv("CUDAL1_API_KEY"); key != nullptr) options.api_key = key;
  }
  if (starts_with(spec, "cmd:")) {
    const std::string command = spec.substr(4);
    if (command.find_first_not_of(" \t") == std::string::npos) {
      throw std::invalid_argument("LLM back end 'cmd:' names no command; " +
                                  std::string(kAcceptedForms));
    }
    return std::make_unique<CommandChatClient>(command, std::move(options));
  }
  if (starts_with(spec, "http://") || starts_with(spec, "https://")) {
    const std::string host = spec.substr(spec.find("//") + 2);
    if (host.empty() || host.front() == '/') {
      throw std::invalid_argument("LLM back end '" + spec + "' names no host; " +
                                  std::string(kAcceptedForms));
    }
    return std::make_unique<HttpChatClient>(spec, std::move(options));
  }
  throw std::invalid_argument("unknown LLM back end '" + spec +
                              "': " + std::string(kAcceptedForms));
}

}  // namespace cudal1::llm
