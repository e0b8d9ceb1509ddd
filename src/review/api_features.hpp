// The suspicious-API features of an analysed source (see code_fingerprint.hpp).
#pragma once

#include <set>
#include <string>

#include "source_analysis.hpp"

namespace cudal1::review {

std::set<std::string> detect_api_features(const AnalysedSource& source);

}  // namespace cudal1::review
