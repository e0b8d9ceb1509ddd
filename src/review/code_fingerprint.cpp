#include "cudal1/review/code_fingerprint.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "api_features.hpp"
#include "source_analysis.hpp"

namespace cudal1::review {
namespace {

// Relative weights of the code features. Attribute chains say most about what a file does
// (torch.cuda.Stream, self.cache.get); single tokens say least.
constexpr double kUnigramWeight = 0.5;
constexpr double kBigramWeight = 1.0;
constexpr double kChainWeight = 1.5;
constexpr double kStructureWeight = 1.0;
// Weight left to features every KernelBench candidate has: enough that two boilerplate-only
// files still look alike, small enough that the boilerplate does not make a legitimate
// candidate look like a hack.
constexpr double kBoilerplateWeight = 0.1;
// Shared suspicious features close at most half of the gap between the code similarity and 1,
// so two different hacks of one class do not outrank a near-copy of either.
constexpr double kApiShare = 0.5;
// The evidence of shared features is counted against at least this much feature weight: one
// shared feature alone is not proof that two files do the same thing.
constexpr double kFullApiEvidence = 2.0;
// Structure n-grams: long enough to capture a statement shape ("ID = ID . add_ ( ID").
constexpr std::size_t kStructureN = 4;

bool is_python_keyword(std::string_view name) {
  static const std::unordered_set<std::string_view> keywords = {
      "False",   "None",     "True",     "and",    "as",   "assert", "async",  "await",
      "break",   "class",    "continue", "def",    "del",  "elif",   "else",   "except",
      "finally", "for",      "from",     "global", "if",   "import", "in",     "is",
      "lambda",  "nonlocal", "not",      "or",     "pass", "raise",  "return", "try",
      "while",   "with",     "yield",    "self",   "super"};
  return keywords.count(name) > 0;
}

bool is_python_builtin(std::string_view name) {
  static const std::unordered_set<std::string_view> builtins = {
      "id",         "hash",    "len",    "range", "setattr", "getattr", "hasattr",
      "isinstance", "globals", "locals", "vars",  "open",    "print",   "type",
      "object",     "list",    "dict",   "tuple", "set",     "int",     "float",
      "str",        "bool",    "min",    "max",   "sum",     "zip",     "enumerate",
      "map",        "iter",    "next",   "exec",  "eval",    "compile", "__import__"};
  return builtins.count(name) > 0;
}

bool is_cpp_keyword(std::string_view name) {
  static const std::unordered_set<std::string_view> keywords = {
      "auto",          "bool",        "break",      "case",       "char",     "const",
      "constexpr",     "continue",    "do",         "double",     "else",     "float",
      "for",           "if",          "int",        "long",       "return",   "short",
      "signed",        "sizeof",      "static",     "struct",     "switch",   "template",
      "typename",      "unsigned",    "void",       "volatile",   "while",    "namespace",
      "using",         "include",     "__global__", "__device__", "__host__", "__shared__",
      "__syncthreads", "__restrict__"};
  return keywords.count(name) > 0;
}

// The structure stream: keywords, operators and API names kept, local names abstracted.
std::vector<std::string> python_structure(const AnalysedSource& a) {
  std::vector<std::string> out;
  out.reserve(a.python.size());
  for (std::size_t i = 0; i < a.python.size(); ++i) {
    const SourceToken& t = a.python[i];
    if (t.kind != TokenKind::kName) {
      out.push_back(t.text);
    } else if (is_python_keyword(t.text) || is_python_builtin(t.text) ||
               a.is_operator(i - 1, ".") || a.aliases.count(t.text) > 0) {
      out.push_back(t.text);
    } else {
      out.push_back("ID");
    }
  }
  return out;
}

std::vector<std::string> native_structure(const std::vector<SourceToken>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const SourceToken& t = tokens[i];
    const bool member =
        i > 0 && tokens[i - 1].kind == TokenKind::kOperator &&
        (tokens[i - 1].text == "." || tokens[i - 1].text == "->" || tokens[i - 1].text == "::");
    const bool api = t.text.rfind("cuda", 0) == 0 || t.text.rfind("__", 0) == 0;
    out.push_back(t.kind != TokenKind::kName || member || api || is_cpp_keyword(t.text) ? t.text
                                                                                        : "ID");
  }
  return out;
}

class FeatureCounter {
 public:
  void add(std::string key, double weight) { counts_[std::move(key)] += weight; }

  void add_tokens(const std::string& prefix, const std::vector<SourceToken>& tokens) {
    std::vector<const std::string*> words;
    for (const SourceToken& t : tokens) {
      if (t.kind != TokenKind::kNewline) words.push_back(&t.text);
    }
    for (std::size_t i = 0; i < words.size(); ++i) {
      add(prefix + "1:" + *words[i], kUnigramWeight);
      if (i + 1 < words.size()) add(prefix + "2:" + *words[i] + " " + *words[i + 1], kBigramWeight);
    }
  }

  void add_structure(const std::string& prefix, const std::vector<std::string>& stream) {
    for (std::size_t i = 0; i + kStructureN <= stream.size(); ++i) {
      std::string key = prefix + "s:";
      for (std::size_t k = 0; k < kStructureN; ++k) key += (k ? " " : "") + stream[i + k];
      add(std::move(key), kStructureWeight);
    }
  }

  // Repeats count sublinearly: a file that calls .add_ twenty times is not twenty times more
  // like another file that calls it once.
  std::map<std::string, double> weights() const {
    std::map<std::string, double> out;
    for (const auto& [key, total] : counts_) out[key] = total > 1 ? 1 + std::log(total) : total;
    return out;
  }

 private:
  std::map<std::string, double> counts_;
};

std::map<std::string, double> raw_code_features(const AnalysedSource& a) {
  FeatureCounter counter;
  counter.add_tokens("py", a.python);
  counter.add_structure("py", python_structure(a));
  for (const AttributeChain& chain : a.chains) {
    if (chain.last > chain.first || chain.resolved.find('.') != std::string::npos) {
      counter.add("pyc:" + chain.resolved, kChainWeight);
    }
  }
  counter.add_tokens("cu", a.native);
  counter.add_structure("cu", native_structure(a.native));
  return counter.weights();
}

// The code every KernelBench candidate starts from.
const std::map<std::string, double>& boilerplate() {
  static const std::map<std::string, double> features = raw_code_features(analyse_source(R"(
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        super().__init__()

    def forward(self, x):
        return x
)"));
  return features;
}

double weighted_jaccard(const std::map<std::string, double>& a,
                        const std::map<std::string, double>& b) {
  double low = 0, high = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() || j != b.end()) {
    if (j == b.end() || (i != a.end() && i->first < j->first)) {
      high += i++->second;
    } else if (i == a.end() || j->first < i->first) {
      high += j++->second;
    } else {
      low += std::min(i->second, j->second);
      high += std::max(i->second, j->second);
      ++i;
      ++j;
    }
  }
  return high > 0 ? low / high : 0.0;
}

double api_feature_weight(std::string_view name) {
  for (const auto& f : api_feature_catalog()) {
    if (f.name == name) return f.weight;
  }
  return 1.0;
}

}  // namespace

CodeFingerprint CodeFingerprint::of(std::string_view source) {
  const AnalysedSource analysed = analyse_source(source);
  CodeFingerprint fingerprint;
  fingerprint.code_ = raw_code_features(analysed);
  const auto& common = boilerplate();
  for (auto& [key, weight] : fingerprint.code_) {
    if (common.count(key) > 0) weight *= kBoilerplateWeight;
  }
  fingerprint.api_ = detect_api_features(analysed);
  return fingerprint;
}

Similarity compare(const CodeFingerprint& a, const CodeFingerprint& b) {
  Similarity s;
  s.code = weighted_jaccard(a.code_features(), b.code_features());
  const auto& x = a.api_features();
  const auto& y = b.api_features();
  std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(s.shared_api));
  double shared = 0, united = 0;
  for (const auto& name : x) united += api_feature_weight(name);
  for (const auto& name : y) united += api_feature_weight(name);
  for (const auto& name : s.shared_api) {
    shared += api_feature_weight(name);
    united -= api_feature_weight(name);
  }
  s.api = shared / std::max(united, kFullApiEvidence);
  s.score = s.code + (1 - s.code) * kApiShare * s.api;
  return s;
}

}  // namespace cudal1::review
