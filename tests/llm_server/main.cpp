// cudal1_test_llm_server: an OpenAI-compatible chat-completion server that answers from a
// script, so the LLM clients can be tested against rate limits, failures and slow replies.
//
//   cudal1_test_llm_server --script FILE [--port N] [--port-file F] [--log F]
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cudal1/llm/chat.hpp"
#include "reply_script.hpp"

namespace {

using cudal1::test::ReplyScript;
using cudal1::test::ReplyStep;
using nlohmann::json;

struct ServerOptions {
  std::filesystem::path script;
  int port = 0;
  std::filesystem::path port_file;
  std::filesystem::path log;
};

ServerOptions parse_arguments(int argc, char** argv) {
  ServerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--script") {
      options.script = value;
    } else if (flag == "--port") {
      options.port = std::stoi(value);
    } else if (flag == "--port-file") {
      options.port_file = value;
    } else if (flag == "--log") {
      options.log = value;
    } else {
      throw std::runtime_error("unknown flag " + flag);
    }
  }
  if (options.script.empty()) throw std::runtime_error("--script FILE is required");
  return options;
}

// One JSON line per request, so tests can count requests and check what was sent.
class RequestLog {
 public:
  explicit RequestLog(const std::filesystem::path& path) {
    if (!path.empty()) out_.open(path, std::ios::app);
  }
  void append(const json& entry) {
    std::lock_guard lock(mutex_);
    if (!out_.is_open()) return;
    out_ << entry.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    out_.flush();
  }

 private:
  std::mutex mutex_;
  std::ofstream out_;
};

// Lets a scripted delay end early when the server is told to stop.
class StopSignal {
 public:
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    changed_.notify_all();
  }
  // False when the sleep was cut short by stop().
  bool sleep(double seconds) {
    std::unique_lock lock(mutex_);
    return !changed_.wait_for(lock, std::chrono::duration<double>(seconds),
                              [this] { return stopped_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopped_ = false;
};

json error_body(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "test_server_error"}}}};
}

std::size_t characters(const cudal1::llm::ChatRequest& request) {
  std::size_t total = 0;
  for (const auto& message : request.messages) total += message.content.size();
  return total;
}

std::string last_user_message(const cudal1::llm::ChatRequest& request) {
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == "user") return it->content;
  }
  return {};
}

json completion(const cudal1::llm::ChatRequest& request, const ReplyStep& step, int serial) {
  // Rough token counts (4 characters a token) so clients have usage numbers to carry.
  const auto prompt_tokens = static_cast<long long>(characters(request) / 4);
  const auto completion_tokens = static_cast<long long>(step.content->size() / 4);
  return {{"id", "chatcmpl-test-" + std::to_string(serial)},
          {"object", "chat.completion"},
          {"created", static_cast<long long>(std::time(nullptr))},
          {"model", request.model},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", *step.content}}},
             {"finish_reason", step.finish_reason}}}},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}}}};
}

void answer(const ReplyStep& step, const cudal1::llm::ChatRequest& request, int serial,
            StopSignal& stop, httplib::Response& response) {
  if (step.match && last_user_message(request).find(*step.match) == std::string::npos) {
    response.status = 400;
    response.set_content(
        error_body("the last user message does not contain \"" + *step.match + "\"").dump(),
        "application/json");
    return;
  }
  if (step.delay_s > 0 && !stop.sleep(step.delay_s)) {
    response.status = 503;
    response.set_content(error_body("the test server is stopping").dump(), "application/json");
    return;
  }
  response.status = step.status;
  for (const auto& [name, value] : step.headers) response.set_header(name, value);
  if (step.raw) {
    response.set_content(*step.raw, "application/json");
  } else if (step.body) {
    response.set_content(step.body->dump(), "application/json");
  } else if (step.content) {
    response.set_content(completion(request, step, serial).dump(), "application/json");
  } else if (step.status != 200) {
    const std::string message =
        step.error.value_or("scripted failure, HTTP " + std::to_string(step.status));
    response.set_content(error_body(message).dump(), "application/json");
  } else {
    response.status = 500;
    response.set_content(error_body("script step gives no reply").dump(), "application/json");
  }
}

void write_port_file(const std::filesystem::path& path, int port) {
  // Written aside and renamed, so a reader never sees half a number.
  const std::filesystem::path partial = path.string() + ".partial";
  std::ofstream(partial) << port << '\n';
  std::filesystem::rename(partial, path);
}

}  // namespace

int main(int argc, char** argv) {
  ServerOptions options;
  std::unique_ptr<ReplyScript> script;
  try {
    options = parse_arguments(argc, argv);
    script = std::make_unique<ReplyScript>(options.script);
  } catch (const std::exception& error) {
    std::cerr
        << "cudal1_test_llm_server: " << error.what() << "\n"
        << "usage: cudal1_test_llm_server --script FILE [--port N] [--port-file F] [--log F]\n";
    return 2;
  }

  // Termination signals are taken by one thread with sigwait, where stopping the server is safe;
  // blocked before any thread starts so that every thread inherits the mask.
  sigset_t termination;
  sigemptyset(&termination);
  sigaddset(&termination, SIGTERM);
  sigaddset(&termination, SIGINT);
  pthread_sigmask(SIG_BLOCK, &termination, nullptr);

  RequestLog log(options.log);
  StopSignal stop;
  std::atomic<int> in_flight{0};
  std::atomic<int> serial{0};
  const auto started = std::chrono::steady_clock::now();

  httplib::Server server;
  // More workers than any test runs requests at once, so the server never limits concurrency.
  server.new_task_queue = [] { return new httplib::ThreadPool(32); };
  const auto handle = [&](const httplib::Request& request, httplib::Response& response) {
    const int now_in_flight = ++in_flight;
    const int number = ++serial;
    const json body = json::parse(request.body, nullptr, false);
    log.append(
        {{"method", request.method},
         {"path", request.path},
         {"authorization", request.has_header("Authorization")
                               ? json(request.get_header_value("Authorization"))
                               : json(nullptr)},
         {"body", body.is_discarded() ? json(request.body) : body},
         {"in_flight", now_in_flight},
         {"time_s",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()}});
    try {
      const auto chat = cudal1::llm::ChatRequest::from_openai_body(body);
      if (const auto step = script->next(last_user_message(chat))) {
        answer(*step, chat, number, stop, response);
      } else {
        response.status = 500;
        response.set_content(error_body("the script has no reply left").dump(), "application/json");
      }
    } catch (const std::exception& error) {
      response.status = 400;
      response.set_content(error_body(error.what()).dump(), "application/json");
    }
    --in_flight;
  };
  server.Post("/v1/chat/completions", handle);
  server.Post("/chat/completions", handle);

  const int port = options.port == 0
                       ? server.bind_to_any_port("127.0.0.1")
                       : (server.bind_to_port("127.0.0.1", options.port) ? options.port : -1);
  if (port <= 0) {
    std::cerr << "cudal1_test_llm_server: cannot listen on 127.0.0.1:" << options.port << "\n";
    return 1;
  }
  if (!options.port_file.empty()) write_port_file(options.port_file, port);

  std::thread signals([&] {
    int received = 0;
    sigwait(&termination, &received);
    stop.stop();
    server.stop();
  });
  signals.detach();  // it ends with the process when the server stops for another reason
  server.listen_after_bind();
  return 0;
}
