#include "cudal1/eval/verdict_text.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cudal1/eval/flags.hpp"
#include "cudal1/eval/profile.hpp"

namespace cudal1 {
namespace {

using nlohmann::json;

constexpr const char* kLabel = "{:<10}";  // the column the values start at

std::string cut(std::string text, std::size_t width) {
  text = text.substr(0, text.find('\n'));
  if (text.size() > width) text = text.substr(0, width > 3 ? width - 3 : 0) + "...";
  return text;
}

std::string line(const std::string& label, const std::string& value) {
  return fmt::format(fmt::runtime(kLabel), label) + value + "\n";
}

std::string device_name(const json& device) {
  if (device.is_string()) return device.get<std::string>();
  if (!device.is_object()) return "";
  std::string name = device.value("name", "");
  if (device.contains("index") && device["index"].is_number_integer())
    name += fmt::format(" (cuda:{})", device["index"].get<int>());
  return name;
}

// How many timing rounds the samples came from (1 when the verdict does not say).
std::size_t rounds_of(const json& details) {
  const auto timing = details.find("timing");
  if (timing == details.end() || !timing->is_object()) return 1;
  const auto rounds = timing->find("rounds");
  if (rounds == timing->end()) return 1;
  if (rounds->is_array()) return std::max<std::size_t>(1, rounds->size());
  if (rounds->is_number_unsigned()) return std::max<std::size_t>(1, rounds->get<std::size_t>());
  return 1;
}

// The first finding recorded for `flag`, if any.
std::string finding_of(const json& details, const std::string& flag) {
  const auto findings = details.find("findings");
  if (findings == details.end() || !findings->is_object()) return "";
  const auto list = findings->find(flag);
  if (list == findings->end() || !list->is_array() || list->empty() || !(*list)[0].is_string())
    return "";
  return (*list)[0].get<std::string>();
}

std::string flag_lines(const std::string& label, const std::vector<std::string>& names,
                       const json& details, std::size_t width) {
  std::size_t name_width = 0;
  for (const auto& name : names) name_width = std::max(name_width, name.size());
  std::string text;
  bool first = true;
  for (const auto& name : names) {
    const FlagInfo* info = find_flag(name);
    std::string meaning =
        info ? std::string(info->description) : "(a flag this cudal1 does not know)";
    if (info && info->effect == FlagEffect::kReject) meaning = "rejects: " + meaning;
    text +=
        line(first ? label : "", fmt::format("{:<{}}  {}", name, name_width, cut(meaning, width)));
    if (const std::string finding = finding_of(details, name); !finding.empty())
      text += line("", fmt::format("{:<{}}  found: {}", "", name_width, cut(finding, width)));
    first = false;
  }
  return text;
}

std::string headline(const Verdict& v) {
  std::string head(to_string(v.status));
  if (v.status == Status::kOk && v.speedup) {
    head += fmt::format(": {:.3f}x {}", *v.speedup, *v.speedup >= 1 ? "faster" : "(slower)");
    if (v.speedup_ci)
      head +=
          fmt::format(", 95% interval {:.3f}x to {:.3f}x", v.speedup_ci->low, v.speedup_ci->high);
    head += fmt::format(", reward {:.3f}", v.reward);
  } else if (v.status == Status::kRejected && v.speedup) {
    head += fmt::format(": reward {:.3f} (it measured {:.3f}x)", v.reward, *v.speedup);
  } else {
    head += fmt::format(": reward {:.3f}", v.reward);
  }
  return head + "\n";
}

}  // namespace

std::string verdict_text(const Verdict& v, std::size_t width) {
  std::string text = headline(v);
  if (v.reference_ms && v.candidate_ms) {
    const std::size_t rounds = rounds_of(v.details);
    text += line("times", fmt::format("reference {:.4g} ms, candidate {:.4g} ms ({} samples{})",
                                      *v.reference_ms, *v.candidate_ms, v.samples,
                                      rounds > 1 ? fmt::format(" in {} rounds", rounds) : ""));
  }
  if (const auto profile = v.details.find("profile");
      profile != v.details.end() && profile->is_object() && profile->contains("candidate")) {
    if (const auto p = Profile::from_json((*profile)["candidate"]); p && !p->summary.empty())
      text += line("profile", p->summary);
  }
  if (const std::string device = device_name(v.device); !device.empty())
    text += line("device", device);
  if (v.max_abs_error || v.correct) {
    std::string check = v.correct ? "outputs match" : "outputs differ";
    const auto trials = v.details.find("trials");
    if (trials != v.details.end() && trials->is_array())
      check += fmt::format(" on {} trial{} with fresh inputs", trials->size(),
                           trials->size() == 1 ? "" : "s");
    if (v.max_abs_error)
      check += fmt::format(": max abs error {:.3g}, max rel error {:.3g}", *v.max_abs_error,
                           v.max_rel_error.value_or(0.0));
    text += line("correct", check);
  }
  if (!v.error.empty())
    text += line(v.status == Status::kRejected ? "why" : "error", cut(v.error, width));
  if (!v.flags.empty()) text += flag_lines("flags", v.flags, v.details, width);
  if (!v.task_flags.empty()) text += flag_lines("task", v.task_flags, v.details, width);
  const auto review = v.details.find("review");
  if (review != v.details.end() && review->is_object()) {
    const std::string state = review->value("state", "");
    std::string said;
    if (state == "reviewed") {
      said = review->value("verdict", "") + " by " + review->value("model", "");
      const json& reasoning = (*review)["reasoning"];
      if (reasoning.is_string()) said += ": " + reasoning.get<std::string>();
    } else {
      const json& reason = (*review)["reason"];
      said = state + (reason.is_string() ? " (" + reason.get<std::string>() + ")" : "");
    }
    text += line("review", cut(said, width));
  }
  return text;
}

}  // namespace cudal1
