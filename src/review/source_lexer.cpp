#include "source_lexer.hpp"

#include <array>
#include <cctype>

namespace cudal1::review {
namespace {

bool is_name_start(unsigned char c) {
  return std::isalpha(c) || c == '_' || c >= 0x80;
}
bool is_name_char(unsigned char c) {
  return std::isalnum(c) || c == '_' || c >= 0x80;
}

// Longest first, so "**=" is one token and not "**" and "=".
constexpr std::array<std::string_view, 4> kThreeCharOperators = {"**=", "//=", ">>=", "<<="};
constexpr std::array<std::string_view, 23> kTwoCharOperators = {
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "->", ":=", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "@=", "::", "&&", "||", "++"};

bool is_string_prefix(std::string_view name) {
  if (name.size() > 2) return false;
  for (char c : name) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower != 'r' && lower != 'b' && lower != 'u' && lower != 'f') return false;
  }
  return true;
}

class Lexer {
 public:
  Lexer(std::string_view text, SourceLanguage language) : s_(text), language_(language) {}

  LexedSource run() {
    while (i_ < s_.size()) step();
    end_statement();
    return std::move(out_);
  }

 private:
  bool python() const { return language_ == SourceLanguage::kPython; }
  char at(std::size_t offset) const { return i_ + offset < s_.size() ? s_[i_ + offset] : '\0'; }

  void emit(TokenKind kind, std::string text) { out_.tokens.push_back({kind, std::move(text)}); }

  // One statement end, however many blank lines or semicolons follow each other.
  void end_statement() {
    if (!out_.tokens.empty() && out_.tokens.back().kind != TokenKind::kNewline) {
      emit(TokenKind::kNewline, "NL");
    }
  }

  void skip_to_line_end() {
    while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }

  void step() {
    const char c = s_[i_];
    if (c == '\n') {
      if (python() && depth_ == 0) end_statement();
      ++i_;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i_;
    } else if (c == '\\' && (at(1) == '\n' || (at(1) == '\r' && at(2) == '\n'))) {
      i_ += at(1) == '\n' ? 2 : 3;  // line continuation
    } else if (python() && c == '#') {
      skip_to_line_end();
    } else if (!python() && c == '/' && at(1) == '/') {
      skip_to_line_end();
    } else if (!python() && c == '/' && at(1) == '*') {
      const auto close = s_.find("*/", i_ + 2);
      i_ = close == std::string_view::npos ? s_.size() : close + 2;
    } else if (c == '"' || c == '\'') {
      string_literal(c);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && std::isdigit(static_cast<unsigned char>(at(1))))) {
      number();
    } else if (is_name_start(static_cast<unsigned char>(c))) {
      name();
    } else {
      punctuation();
    }
  }

  void name() {
    const std::size_t begin = i_;
    while (i_ < s_.size() && is_name_char(static_cast<unsigned char>(s_[i_]))) ++i_;
    const std::string_view text = s_.substr(begin, i_ - begin);
    if (python() && i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') && is_string_prefix(text)) {
      string_literal(s_[i_]);
      return;
    }
    emit(TokenKind::kName, std::string(text));
  }

  void number() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
        ++i_;
      } else if ((c == '+' || c == '-') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')) {
        ++i_;  // exponent sign
      } else {
        break;
      }
    }
    emit(TokenKind::kNumber, "NUM");
  }

  // Python: '...', "...", '''...''', """...""" (an unterminated one-line string ends at the
  // line). C++: "..." and '...'. A backslash always escapes the next character for the purpose
  // of finding the end, raw or not.
  void string_literal(char quote) {
    const bool triple = python() && at(1) == quote && at(2) == quote;
    i_ += triple ? 3 : 1;
    const std::size_t begin = i_;
    std::size_t end = s_.size();
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\\') {
        i_ += 2;
      } else if (triple && c == quote && at(1) == quote && at(2) == quote) {
        end = i_;
        i_ += 3;
        break;
      } else if (!triple && c == quote) {
        end = i_;
        ++i_;
        break;
      } else if (!triple && c == '\n') {
        end = i_;
        break;
      } else {
        ++i_;
      }
    }
    i_ = std::min(i_, s_.size());
    out_.strings.emplace_back(s_.substr(begin, std::min(end, s_.size()) - begin));
    emit(TokenKind::kString, "STR");
  }

  void punctuation() {
    for (std::string_view op : kThreeCharOperators) {
      if (s_.substr(i_, 3) == op) {
        emit(TokenKind::kOperator, std::string(op));
        i_ += 3;
        return;
      }
    }
    for (std::string_view op : kTwoCharOperators) {
      if (s_.substr(i_, 2) == op) {
        emit(TokenKind::kOperator, std::string(op));
        i_ += 2;
        return;
      }
    }
    const char c = s_[i_++];
    if (c == '(' || c == '[' || c == '{') ++depth_;
    if ((c == ')' || c == ']' || c == '}') && depth_ > 0) --depth_;
    if (c == ';') {
      end_statement();
      return;
    }
    emit(TokenKind::kOperator, std::string(1, c));
  }

  std::string_view s_;
  SourceLanguage language_;
  std::size_t i_ = 0;
  int depth_ = 0;  // brackets open: a Python newline inside them does not end the statement
  LexedSource out_;
};

}  // namespace

LexedSource lex_source(std::string_view source, SourceLanguage language) {
  return Lexer(source, language).run();
}

bool looks_like_native_code(std::string_view text) {
  const bool statements =
      text.find(';') != std::string_view::npos && text.find('{') != std::string_view::npos;
  return statements || text.find("#include") != std::string_view::npos ||
         text.find("__global__") != std::string_view::npos;
}

}  // namespace cudal1::review
