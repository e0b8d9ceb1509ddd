#include "source_analysis.hpp"

namespace cudal1::review {
namespace {

const SourceToken kNoToken{TokenKind::kNewline, ""};

// Reads a dotted name ("a.b.c") starting at `i`; returns it and moves `i` past it.
std::string dotted_name(const AnalysedSource& a, std::size_t& i, std::size_t end) {
  std::string name;
  while (i < end && a.python[i].kind == TokenKind::kName) {
    name += a.python[i].text;
    if (i + 2 < end && a.is_operator(i + 1, ".") && a.python[i + 2].kind == TokenKind::kName) {
      name += '.';
      i += 2;
    } else {
      ++i;
      break;
    }
  }
  return name;
}

// `import a.b as c, d` binds c to "a.b" and d to "d".
void read_import(AnalysedSource& a, std::size_t i, std::size_t end) {
  while (i < end) {
    const std::string module = dotted_name(a, i, end);
    if (module.empty()) return;
    if (a.is_name(i, "as") && i + 1 < end && a.python[i + 1].kind == TokenKind::kName) {
      a.aliases[a.python[i + 1].text] = module;
      i += 2;
    } else {
      const std::string head = module.substr(0, module.find('.'));
      a.aliases.emplace(head, head);
    }
    if (!a.is_operator(i, ",")) return;
    ++i;
  }
}

// `from a.b import c as d, e` binds d to "a.b.c" and e to "a.b.e".
void read_from_import(AnalysedSource& a, std::size_t i, std::size_t end) {
  std::string module;
  while (i < end && a.python[i].kind == TokenKind::kOperator && a.python[i].text == ".") {
    module += '.';
    ++i;
  }
  if (!a.is_name(i, "import")) module += dotted_name(a, i, end);
  if (!a.is_name(i, "import")) return;
  ++i;
  if (a.is_operator(i, "(")) ++i;
  while (i < end && a.python[i].kind == TokenKind::kName) {
    const std::string name = a.python[i].text;
    ++i;
    std::string bound = name;
    if (a.is_name(i, "as") && i + 1 < end && a.python[i + 1].kind == TokenKind::kName) {
      bound = a.python[i + 1].text;
      i += 2;
    }
    a.aliases[bound] = module.empty() || module.back() == '.' ? module + name : module + "." + name;
    if (!a.is_operator(i, ",")) return;
    ++i;
  }
}

void read_imports(AnalysedSource& a) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= a.python.size(); ++i) {
    if (i < a.python.size() && a.python[i].kind != TokenKind::kNewline) continue;
    if (a.is_name(begin, "import")) read_import(a, begin + 1, i);
    if (a.is_name(begin, "from")) read_from_import(a, begin + 1, i);
    begin = i + 1;
  }
}

void read_chains(AnalysedSource& a) {
  for (std::size_t i = 0; i < a.python.size(); ++i) {
    if (a.python[i].kind != TokenKind::kName || (i > 0 && a.is_operator(i - 1, "."))) continue;
    AttributeChain chain;
    chain.first = i;
    std::size_t j = i;
    std::string head = a.python[i].text;
    if (const auto alias = a.aliases.find(head); alias != a.aliases.end()) head = alias->second;
    chain.resolved = head;
    while (a.is_operator(j + 1, ".") && a.token(j + 2).kind == TokenKind::kName) {
      chain.resolved += "." + a.python[j + 2].text;
      j += 2;
    }
    chain.last = j;
    a.chains.push_back(std::move(chain));
  }
}

// Names of the embedded code, and each qualified name ("std::thread", "at::cuda::getStream").
void read_native_names(AnalysedSource& a) {
  const auto& t = a.native;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != TokenKind::kName) continue;
    a.native_names.push_back(t[i].text);
    const bool continues = i >= 2 && t[i - 1].text == "::" && t[i - 2].kind == TokenKind::kName;
    if (continues) continue;
    std::string qualified = t[i].text;
    for (std::size_t j = i;
         j + 2 < t.size() && t[j + 1].text == "::" && t[j + 2].kind == TokenKind::kName; j += 2) {
      qualified += "::" + t[j + 2].text;
      a.native_names.push_back(qualified);
    }
  }
}

}  // namespace

const SourceToken& AnalysedSource::token(std::size_t index) const {
  return index < python.size() ? python[index] : kNoToken;
}

bool AnalysedSource::is_operator(std::size_t index, std::string_view text) const {
  const SourceToken& t = token(index);
  return t.kind == TokenKind::kOperator && t.text == text;
}

bool AnalysedSource::is_name(std::size_t index, std::string_view text) const {
  const SourceToken& t = token(index);
  return t.kind == TokenKind::kName && t.text == text;
}

AnalysedSource analyse_source(std::string_view python_source) {
  LexedSource lexed = lex_source(python_source, SourceLanguage::kPython);
  AnalysedSource a;
  a.python = std::move(lexed.tokens);
  for (std::string& text : lexed.strings) {
    if (!looks_like_native_code(text)) {
      a.strings.push_back(std::move(text));
      continue;
    }
    LexedSource native = lex_source(text, SourceLanguage::kCpp);
    a.native.insert(a.native.end(), native.tokens.begin(), native.tokens.end());
    a.strings.insert(a.strings.end(), native.strings.begin(), native.strings.end());
  }
  read_native_names(a);
  read_imports(a);
  read_chains(a);
  return a;
}

}  // namespace cudal1::review
