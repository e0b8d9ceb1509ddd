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

}  // namespace

ReplyScript::ReplyScript(const std::filesystem::path& file) {
  const json script = json::parse(read_text(file), nullptr, false);
  if (!script.is_object()) throw std::runtime_error(file.string() + ": not a JSON object");
  const auto directory = file.parent_path();
  if (const auto replies = script.find("replies"); replies != script.end()) {
    if (!replies->is_array())
      throw std::runtime_error(file.string() + ": \"replies\" is not a list");
    for (std::size_t i = 0; i < replies->size(); ++i) {
      replies_.push_back(parse_step((*replies)[i], directory,
                                    file.string() + ": replies[" + std::to_string(i) + "]"));
    }
  }
  if (const auto fallback = script.find("default"); fallback != script.end()) {
    default_ = parse_step(*fallback, directory, file.string() + ": default");
  }
}

std::optional<ReplyStep> ReplyScript::next() {
  std::lock_guard lock(mutex_);
  if (used_ < replies_.size()) return replies_[used_++];
  return default_;
}

}  // namespace cudal1::test
