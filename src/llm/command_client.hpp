// The back end for a local command ("cmd:llm -m mymodel", a script around a CLI, `cat` in
// tests): the prompt goes to its stdin, the reply comes from its stdout.
#pragma once

#include <string>

#include "cudal1/llm/client.hpp"
#include "request_slots.hpp"

namespace cudal1::llm {

class CommandChatClient final : public LlmClient {
 public:
  // `command` is run by /bin/sh -c, once per request, in its own process group. It also finds
  // the request's model and temperature in $CUDAL1_MODEL and $CUDAL1_TEMPERATURE.
  CommandChatClient(std::string command, ClientOptions options);

  ChatResponse complete(const ChatRequest& request) override;
  std::string describe() const override { return "cmd:" + command_; }

  // What the command reads: every message's content, system messages first, separated by a
  // blank line.
  static std::string prompt_text(const ChatRequest& request);

 private:
  std::string command_;
  ClientOptions options_;
  RequestSlots slots_;
};

}  // namespace cudal1::llm
