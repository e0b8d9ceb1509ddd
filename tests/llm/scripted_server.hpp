// Runs cudal1_test_llm_server with a reply script for one test and reads back what it received.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cudal1/common/process.hpp"

namespace cudal1::llm {

class ScriptedServer {
 public:
  // Starts the server and waits until it listens; throws std::runtime_error if it does not.
  explicit ScriptedServer(const nlohmann::json& script);
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }
  std::string base_url() const;  // http://127.0.0.1:PORT/v1
  // One entry per request received: method, path, authorization, body, in_flight, time_s.
  std::vector<nlohmann::json> requests() const;
  // SIGTERM, then the exit status (nullopt if it had to be killed after `grace_s`).
  std::optional<ExitStatus> terminate(double grace_s);

 private:
  std::filesystem::path directory_;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace cudal1::llm
