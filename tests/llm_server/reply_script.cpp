#include "reply_script.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cudal1::test {
namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ReplyStep parse_step(const json& spec, const std::filesystem::path& directory,
                     const std::string& where) {
  if (!spec.is_object()) throw std::runtime_error(where + ": a step must be a JSON object");
  ReplyStep step;
  try {
    step.status = spec.value("status", 200);
    step.headers = spec.value("headers", std::map<std::string, std::string>{});
    step.delay_s = spec.value("delay_s", 0.0);
    step.finish_reason = spec.value("finish_reason", std::string("stop"));
    if (spec.contains("raw")) step.raw = spec.at("raw").get<std::string>();
    if (spec.contains("body")) step.body = spec.at("body");
    if (spec.contains("content")) step.content = spec.at("content").get<std::string>();
    if (spec.contains("content_file")) {
      step.content = read_text(directory / spec.at("content_file").get<std::string>());
    }
    if (spec.contains("match")) step.match = spec.at("match").get<std::string>();
    if (spec.contains("error")) step.error = spec.at("error").get<std::string>();
  } catch (const json::exception& error) {
    throw std::runtime_error(where + ": " + error.what());
  }
  return step;
}

// The steps of one route (or of the top level): "replies" and "default".
void read_steps(const json& spec, const std::filesystem::path& directory, const std::string& where,
                std::vector<ReplyStep>& replies, std::optional<ReplyStep>& fallback) {
  if (const auto list = spec.find("replies"); list != spec.end()) {
    if (!list->is_array()) throw std::runtime_error(where + ": \"replies\" is not a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      replies.push_back(
          parse_step((*list)[i], directory, where + ": replies[" + std::to_string(i) + "]"));
    }
  }
  if (const auto step = spec.find("default"); step != spec.end()) {
    fallback = parse_step(*step, directory, where + ": default");
  }
}

}  // namespace

ReplyScript::ReplyScript(const std::filesystem::path& file) {
  const json script = json::parse(read_text(file), nullptr, false);
  if (!script.is_object()) throw std::runtime_error(file.string() + ": not a JSON object");
  const auto directory = file.parent_path();
  if (const auto routes = script.find("routes"); routes != script.end()) {
    if (!routes->is_array()) throw std::runtime_error(file.string() + ": \"routes\" is not a list");
    for (std::size_t i = 0; i < routes->size(); ++i) {
      const std::string where = file.string() + ": routes[" + std::to_string(i) + "]";
      const json& spec = (*routes)[i];
      if (!spec.is_object() || !spec.contains("match") || !spec["match"].is_string() ||
          spec["match"].get<std::string>().empty()) {
        throw std::runtime_error(where + ": a route needs a non-empty \"match\" text");
      }
      Route route;
      route.match = spec["match"].get<std::string>();
      read_steps(spec, directory, where, route.replies, route.fallback);
      routes_.push_back(std::move(route));
    }
  }
  Route top;
  read_steps(script, directory, file.string(), top.replies, top.fallback);
  routes_.push_back(std::move(top));
}

std::optional<ReplyStep> ReplyScript::next(const std::string& user_message) {
  std::lock_guard lock(mutex_);
  for (auto& route : routes_) {
    if (!route.match.empty() && user_message.find(route.match) == std::string::npos) continue;
    if (route.used < route.replies.size()) return route.replies[route.used++];
    return route.fallback;
  }
  return std::nullopt;
}

}  // namespace cudal1::test
