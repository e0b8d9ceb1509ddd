// The rewards a store holds (given by cudal1 serve), read for the training view of the report.
#pragma once

#include <vector>

#include "cudal1/report/training_run.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::data {

// Every reward in the order given, each with its candidate's verified speedup where the verdict
// is ok and carries no reject flag.
std::vector<report::RewardEvent> reward_events(store::Store& store);

}  // namespace cudal1::data
