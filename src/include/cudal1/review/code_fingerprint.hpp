// How alike two candidate files are, for finding the known hack cases nearest to a candidate.
// A fingerprint holds two views of a file:
//  - code features: token unigrams and bigrams, attribute chains with import aliases resolved
//    (`from threading import Thread` makes `Thread` read as `threading.Thread`), and 4-grams of
//    a structure stream where local names are abstracted away; the same for C++/CUDA source
//    embedded in string literals. Comments, whitespace and prose strings do not count, and the
//    KernelBench boilerplate every candidate shares (imports, `class ModelNew(nn.Module)`,
//    `super().__init__()`) counts for little.
//  - suspicious-API features: named uses that hacks need far more often than honest code does
//    (threads, side streams, Tensor subclasses, data_ptr caches, monkey-patching, ...).
// The score is the code similarity, raised towards 1 by shared suspicious features: shared
// features make two files more alike, features of one side only do not make them less alike.
// Scores are symmetric, in [0, 1], and depend only on the two files (not on the rest of a
// corpus), so a score can be explained and reproduced.
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cudal1::review {

struct ApiFeatureInfo {
  std::string_view name;         // "threads", "side_streams", ...
  std::string_view description;  // one line, shown to people and to the reviewer
  double weight = 1.0;           // evidence of sharing it: less for uses honest code often has
};

// Every suspicious-API feature a fingerprint can hold.
std::span<const ApiFeatureInfo> api_feature_catalog();

class CodeFingerprint {
 public:
  // `source` is Python (a candidate file); any text is accepted.
  static CodeFingerprint of(std::string_view source);

  const std::map<std::string, double>& code_features() const { return code_; }
  const std::set<std::string>& api_features() const { return api_; }

 private:
  std::map<std::string, double> code_;  // feature -> weight
  std::set<std::string> api_;
};

struct Similarity {
  double score = 0;  // what cases are ranked by: code + (1 - code) * 0.5 * api
  double code = 0;   // weighted Jaccard of the code features
  // Weight of the shared suspicious features over the weight of all of them on either side,
  // the latter counted as at least 2 (two rare features): one shared common feature is weak
  // evidence, the same three rare features on both sides are full evidence.
  double api = 0;
  std::vector<std::string> shared_api;
};

Similarity compare(const CodeFingerprint& a, const CodeFingerprint& b);

}  // namespace cudal1::review
