// A candidate file read the way the fingerprint needs it: Python tokens, import aliases, the
// attribute chains they resolve, and the tokens of embedded C++/CUDA source.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "source_lexer.hpp"

namespace cudal1::review {

struct AttributeChain {
  std::string resolved;   // "torch.cuda.Stream": dotted names, the head's import alias resolved
  std::size_t first = 0;  // index of the first and last name token in AnalysedSource::python
  std::size_t last = 0;
};

struct AnalysedSource {
  std::vector<SourceToken> python;  // the Python tokens
  // Contents of the string literals that are not C++/CUDA code, and of the string literals
  // inside that code: paths and flags, never code or comments.
  std::vector<std::string> strings;
  std::vector<SourceToken> native;        // tokens of every string literal that is C++/CUDA code
  std::vector<std::string> native_names;  // its names, qualified ones too ("std::thread")
  std::map<std::string, std::string>
      aliases;                         // bound name -> module path ("F" -> "torch.nn.functional")
  std::vector<AttributeChain> chains;  // every chain, single names included

  // The token at `index`, or an empty token past either end.
  const SourceToken& token(std::size_t index) const;
  bool is_operator(std::size_t index, std::string_view text) const;
  bool is_name(std::size_t index, std::string_view text) const;
};

AnalysedSource analyse_source(std::string_view python_source);

}  // namespace cudal1::review
