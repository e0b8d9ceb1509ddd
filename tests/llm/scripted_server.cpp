#include "scripted_server.hpp"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::llm {

ScriptedServer::ScriptedServer(const nlohmann::json& script)
    : directory_(
          make_private_directory(std::filesystem::temp_directory_path(), "cudal1-llm-server-")) {
  std::ofstream(directory_ / "script.json") << script.dump(2);
  const auto port_file = directory_ / "port";
  ProcessSpec spec;
  spec.argv = {CUDAL1_TEST_LLM_SERVER,
               "--script",
               (directory_ / "script.json").string(),
               "--port",
               "0",
               "--port-file",
               port_file.string(),
               "--log",
               (directory_ / "requests.jsonl").string()};
  spec.log_file = directory_ / "server.log";
  process_ = ChildProcess::spawn(spec);
  // Start-up takes milliseconds; ten seconds covers a loaded CI machine.
  for (int i = 0; i < 1000 && !std::filesystem::exists(port_file); ++i) {
    if (process_->poll_exit()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!std::filesystem::exists(port_file)) {
    throw std::runtime_error("the test LLM server did not start: " +
                             read_file(directory_ / "server.log"));
  }
  port_ = std::stoi(read_file(port_file));
}

ScriptedServer::~ScriptedServer() {
  terminate(5);
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string ScriptedServer::base_url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
}

std::vector<nlohmann::json> ScriptedServer::requests() const {
  std::vector<nlohmann::json> out;
  std::ifstream in(directory_ / "requests.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

std::optional<ExitStatus> ScriptedServer::terminate(double grace_s) {
  if (auto status = process_->poll_exit()) return status;
  ::kill(process_->pid(), SIGTERM);
  return process_->wait_or_kill(grace_s);
}

}  // namespace cudal1::llm
