// The list of defenses: a new one is a file of this folder and one line here (its declaration
// and its place in the list, which is the order its phase runs them in).
#include <array>

#include "cudal1/eval/defenses.hpp"

namespace cudal1 {

namespace defenses {
Defense task_inputs();       // task_inputs.cpp
Defense spot_checks();       // spot_checks.cpp
Defense unseen_inputs();     // unseen_inputs.cpp
Defense background_work();   // background_work.cpp
Defense extra_streams();     // extra_streams.cpp
Defense no_custom_kernel();  // no_custom_kernel.cpp
Defense speed_of_light();    // speed_of_light.cpp
}  // namespace defenses

std::span<const Defense> defense_list() {
  static const std::array kList = {
      defenses::task_inputs(),     defenses::spot_checks(),   defenses::unseen_inputs(),
      defenses::background_work(), defenses::extra_streams(), defenses::no_custom_kernel(),
      defenses::speed_of_light(),
  };
  return kList;
}

void run_defenses(DefenseContext& context) {
  for (const Defense& defense : defense_list()) {
    if (defense.phase == context.phase) defense.run(context);
  }
}

std::string_view to_string(DefensePhase phase) {
  switch (phase) {
    case DefensePhase::kInputs:
      return "inputs";
    case DefensePhase::kSpotCheck:
      return "spot_check";
    case DefensePhase::kSampled:
      return "sampled";
    case DefensePhase::kActivity:
      return "activity";
    case DefensePhase::kVerdict:
      break;
  }
  return "verdict";
}

nlohmann::json defenses_to_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const Defense& defense : defense_list()) {
    nlohmann::json flags = nlohmann::json::array();
    for (std::string_view flag : defense.flags) flags.push_back(flag);
    list.push_back({{"name", defense.name},
                    {"phase", to_string(defense.phase)},
                    {"flags", flags},
                    {"summary", defense.summary}});
  }
  return list;
}

}  // namespace cudal1
