#include "cudal1/serve/reward_protocol.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cudal1/common/sha256.hpp"
#include "cudal1/serve/completion.hpp"

namespace cudal1::serve {
namespace {

using nlohmann::json;

json parse_body(const std::string& body) {
  if (body.empty()) throw BadRequest(400, "the request has no body; send a JSON object");
  try {
    json value = json::parse(body);
    if (!value.is_object()) throw BadRequest(400, "the body must be a JSON object");
    return value;
  } catch (const json::parse_error& e) {
    throw BadRequest(400, fmt::format("the body is not valid JSON: {}", e.what()));
  }
}

// A required list of strings.
std::vector<std::string> string_list(const json& body, const char* field) {
  if (!body.contains(field)) throw BadRequest(400, fmt::format("\"{}\" is missing", field));
  const json& list = body[field];
  if (!list.is_array())
    throw BadRequest(400, fmt::format("\"{}\" must be a list of strings", field));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      throw BadRequest(
          400, fmt::format("{}[{}] must be a string, not {}", field, i, list[i].type_name()));
    }
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

void check_count(std::size_t count, std::size_t max_items) {
  if (count > max_items) {
    throw BadRequest(413, fmt::format("{} items in one request; the server takes at most {} "
                                      "(--max-items): split the batch",
                                      count, max_items));
  }
}

void check_task(const std::string& key, const TaskCatalog& catalog, const std::string& where) {
  if (catalog.find(key) != nullptr) return;
  throw BadRequest(400, fmt::format("{}: unknown task '{}' (not a file of the suite {}; GET "
                                    "/v1/tasks lists the keys, e.g. level1/1_Name)",
                                    where, key, catalog.root().string()));
}

std::optional<std::string> optional_string(const json& object, const char* field,
                                           const std::string& where) {
  if (!object.contains(field) || object[field].is_null()) return std::nullopt;
  if (!object[field].is_string()) {
    throw BadRequest(400, fmt::format("{}.{} must be a string", where, field));
  }
  return object[field].get<std::string>();
}

json number_or_null(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

RewardRequest parse_openrlhf_request(const std::string& body, const TaskCatalog& catalog,
                                     std::size_t max_items) {
  const json request = parse_body(body);
  const auto queries = string_list(request, "query");
  const auto labels = string_list(request, "labels");
  std::vector<std::string> prompts;
  if (request.contains("prompts") && !request["prompts"].is_null()) {
    prompts = string_list(request, "prompts");
  }
  check_count(queries.size(), max_items);
  if (labels.size() != queries.size()) {
    throw BadRequest(400, fmt::format("\"labels\" has {} entries and \"query\" {}: one task key "
                                      "per query is needed",
                                      labels.size(), queries.size()));
  }
  if (!prompts.empty() && prompts.size() != queries.size()) {
    throw BadRequest(400, fmt::format("\"prompts\" has {} entries and \"query\" {}: one prompt "
                                      "per query is needed",
                                      prompts.size(), queries.size()));
  }
  RewardRequest out;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    check_task(labels[i], catalog, fmt::format("labels[{}]", i));
    RewardItem item;
    item.task = labels[i];
    const auto completion = completion_of_query(queries[i], prompts.empty() ? "" : prompts[i]);
    if (completion) {
      item.completion = *completion;
    } else {
      item.unusable =
          "the query does not contain its prompt, so the completion cannot be told apart from "
          "the code the prompt shows; send query = prompt + completion";
    }
    out.items.push_back(std::move(item));
  }
  return out;
}

RewardRequest parse_native_request(const std::string& body, const TaskCatalog& catalog,
                                   std::size_t max_items) {
  const json request = parse_body(body);
  if (!request.contains("items") || !request["items"].is_array()) {
    throw BadRequest(400,
                     "\"items\" must be a list of {\"task\", \"completion\" or \"code\", "
                     "\"group\"?} objects");
  }
  const json& items = request["items"];
  check_count(items.size(), max_items);
  RewardRequest out;
  if (request.contains("step") && !request["step"].is_null()) {
    if (!request["step"].is_number_integer()) throw BadRequest(400, "\"step\" must be an integer");
    out.step = request["step"].get<std::int64_t>();
  }
  if (auto id = optional_string(request, "request_id", "the body")) out.request_id = *id;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string where = fmt::format("items[{}]", i);
    const json& entry = items[i];
    if (!entry.is_object()) throw BadRequest(400, where + " must be an object");
    RewardItem item;
    const auto task = optional_string(entry, "task", where);
    if (!task) throw BadRequest(400, where + ".task is missing (a task key, e.g. level1/1_Name)");
    check_task(*task, catalog, where + ".task");
    item.task = *task;
    item.completion = optional_string(entry, "completion", where);
    item.code = optional_string(entry, "code", where);
    if (item.completion.has_value() == item.code.has_value()) {
      throw BadRequest(400, where +
                                " needs exactly one of \"completion\" (a model's reply) and "
                                "\"code\" (a complete ModelNew file)");
    }
    if (entry.contains("group") && !entry["group"].is_null()) {
      const json& group = entry["group"];
      if (group.is_string()) {
        item.group = group.get<std::string>();
      } else if (group.is_number_integer()) {
        item.group = std::to_string(group.get<std::int64_t>());
      } else {
        throw BadRequest(400, where + ".group must be a string or an integer");
      }
    }
    out.items.push_back(std::move(item));
  }
  return out;
}

json openrlhf_reply(const std::vector<RewardResult>& results, bool text_logs) {
  json rewards = json::array(), scores = json::array(), speedups = json::array(),
       statuses = json::array(), flags = json::array(), correct = json::array(),
       rejected = json::array(), reviews = json::array();
  for (const auto& r : results) {
    reviews.push_back(r.review);
    rewards.push_back(r.reward);
    scores.push_back(r.raw_reward);
    // 0 where nothing was timed: trainers log these as numbers.
    speedups.push_back(r.speedup.value_or(0.0));
    statuses.push_back(r.status);
    flags.push_back(fmt::format("{}", fmt::join(r.flags, ",")));
    correct.push_back(r.status == "ok" ? 1.0 : 0.0);
    rejected.push_back(r.status == "rejected" ? 1.0 : 0.0);
  }
  json logs = {{"speedup", speedups}, {"correct", correct}, {"rejected", rejected}};
  if (text_logs) {
    logs["status"] = statuses;
    logs["flags"] = flags;
    logs["review"] = reviews;
  }
  return {{"rewards", rewards}, {"scores", scores}, {"extra_logs", logs}};
}

json native_reply(const std::vector<RewardResult>& results, const std::string& request_id) {
  json items = json::array();
  for (const auto& r : results) {
    items.push_back(
        {{"task", r.task},
         {"status", r.status},
         {"speedup", number_or_null(r.speedup)},
         {"speedup_ci",
          r.speedup_ci ? json::array({r.speedup_ci->first, r.speedup_ci->second}) : json(nullptr)},
         {"flags", r.flags},
         {"raw_reward", r.raw_reward},
         {"reward", r.reward},
         {"advantage", number_or_null(r.advantage)},
         {"candidate_id", r.candidate_id ? json(*r.candidate_id) : json(nullptr)},
         {"cached", r.cached},
         {"review", r.review.empty() ? json(nullptr) : json(r.review)},
         {"error", r.error}});
  }
  return {{"request_id", request_id}, {"results", items}};
}

std::string request_key(const std::string& endpoint, const std::string& body) {
  // nlohmann::json keeps an object's keys sorted, so dump() is the canonical form.
  const std::string canonical =
      json::parse(body).dump(-1, ' ', false, json::error_handler_t::replace);
  return sha256_hex(endpoint + "\n" + canonical);
}

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump();
}

}  // namespace cudal1::serve
