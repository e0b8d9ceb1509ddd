#include "cudal1/search/optimize_settings.hpp"

#include "cudal1/common/error.hpp"

namespace cudal1::search {

void OptimizeSettings::check() const {
  if (rounds < 1 || samples < 1) throw InputError("--rounds and --samples must be at least 1");
  if (model.empty()) throw InputError("--model is required (the model name the LLM server knows)");
  try {
    make_sampler(sampler, sampler_options);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

nlohmann::json OptimizeSettings::to_json() const {
  nlohmann::json json = {
      {"model", model},
      {"rounds", rounds},
      {"samples", samples},
      {"exemplars", exemplars},
      {"temperature", temperature},
      {"max_tokens", max_tokens ? nlohmann::json(*max_tokens) : nlohmann::json(nullptr)},
      {"budget_tokens", budget_tokens ? nlohmann::json(*budget_tokens) : nlohmann::json(nullptr)},
      {"sampler", sampler},
      {"bucket_width", sampler_options.bucket_width},
      {"sampler_temperature", sampler_options.temperature},
      {"islands", sampler_options.islands},
      {"migration", sampler_options.migration},
      {"show_failures", show_failures},
      {"prompt_profile", prompt_profile},
      {"seed", seed},
      {"prompt_template", prompt_template},
      {"stage", stage}};
  if (stage_round) json["round"] = *stage_round;
  if (!suite_key.empty()) json["suite_key"] = suite_key;
  if (evaluation.is_object()) json["evaluation"] = evaluation;
  return json;
}

OptimizeSettings OptimizeSettings::from_json(const nlohmann::json& json) {
  OptimizeSettings s;
  s.model = json.value("model", "");
  s.rounds = json.value("rounds", s.rounds);
  s.samples = json.value("samples", s.samples);
  s.exemplars = json.value("exemplars", s.exemplars);
  s.temperature = json.value("temperature", s.temperature);
  if (json.contains("max_tokens") && json["max_tokens"].is_number())
    s.max_tokens = json["max_tokens"].get<int>();
  if (json.contains("budget_tokens") && json["budget_tokens"].is_number()) {
    s.budget_tokens = json["budget_tokens"].get<long long>();
  }
  s.sampler = json.value("sampler", s.sampler);
  s.sampler_options.bucket_width = json.value("bucket_width", s.sampler_options.bucket_width);
  s.sampler_options.temperature = json.value("sampler_temperature", s.sampler_options.temperature);
  s.sampler_options.islands = json.value("islands", s.sampler_options.islands);
  s.sampler_options.migration = json.value("migration", s.sampler_options.migration);
  s.show_failures = json.value("show_failures", s.show_failures);
  s.prompt_profile = json.value("prompt_profile", s.prompt_profile);
  s.seed = json.value("seed", s.seed);
  s.prompt_template = json.value("prompt_template", s.prompt_template);
  s.stage = json.value("stage", s.stage);
  if (json.contains("round") && json["round"].is_number_integer())
    s.stage_round = json["round"].get<int>();
  s.suite_key = json.value("suite_key", "");
  if (json.contains("evaluation") && json["evaluation"].is_object())
    s.evaluation = json["evaluation"];
  return s;
}

std::string stage_of_run(const nlohmann::json& options, const std::string& llm) {
  if (options.is_object() && options.contains("stage") && options["stage"].is_string())
    return options["stage"].get<std::string>();
  return llm == "serve" ? kStageRl : kStageOptimize;
}

}  // namespace cudal1::search
