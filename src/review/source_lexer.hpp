// Tokens of Python source, and of the C++/CUDA source that candidates embed in string literals
// (load_inline). Comments, whitespace and string contents never become tokens: two files that
// differ only there have the same token stream. Never throws: any bytes lex to something.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cudal1::review {

enum class TokenKind {
  kName,      // identifiers and keywords
  kNumber,    // text "NUM"
  kString,    // text "STR"; the content is in LexedSource::strings
  kOperator,  // punctuation and operators, multi-character ones whole ("**=", "->", "::")
  kNewline,   // end of a logical line (Python) or statement (";" in both languages)
};

struct SourceToken {
  TokenKind kind;
  std::string text;
};

struct LexedSource {
  std::vector<SourceToken> tokens;
  std::vector<std::string> strings;  // contents of the string literals, in order
};

enum class SourceLanguage { kPython, kCpp };

LexedSource lex_source(std::string_view source, SourceLanguage language);

// Whether a string literal holds C++/CUDA source rather than prose or a path.
bool looks_like_native_code(std::string_view text);

}  // namespace cudal1::review
