#include "cudal1/eval/kernel_name.hpp"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

namespace cudal1 {
namespace {

std::optional<std::string> demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return std::nullopt;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !text) return std::nullopt;
  return std::string(text.get());
}

// "void ns::f<int, (anonymous namespace)::g(...)>(int)" -> "ns::f<...>" and "f".
KernelName from_demangled(const std::string& text) {
  // The parameter list: the first '(' outside template arguments (a name itself may hold
  // "(anonymous namespace)", which is inside "<...>" or followed by "::").
  int angle = 0;
  std::size_t end = text.size();
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (c == '(' && angle == 0) {
      if (text.compare(i, 21, "(anonymous namespace)") == 0) {
        i += 20;
        continue;
      }
      end = i;
      break;
    }
  }
  std::string head = text.substr(0, end);
  // Template arguments at the end, collapsed.
  std::string readable;
  angle = 0;
  for (char c : head) {
    if (c == '<') {
      if (angle++ == 0) readable += "<...>";
      continue;
    }
    if (c == '>' && angle > 0) {
      --angle;
      continue;
    }
    if (angle == 0) readable += c;
  }
  // A return type before the name ("void f<...>"): the last space outside "(anonymous
  // namespace)".
  std::size_t start = 0;
  for (std::size_t i = 0; i < readable.size(); ++i) {
    if (readable.compare(i, 21, "(anonymous namespace)") == 0) {
      i += 20;
      continue;
    }
    if (readable[i] == ' ') start = i + 1;
  }
  readable = readable.substr(start);
  std::string identifier = readable;
  if (const auto angle_at = identifier.find('<'); angle_at != std::string::npos)
    identifier.resize(angle_at);
  if (const auto colons = identifier.rfind("::"); colons != std::string::npos)
    identifier = identifier.substr(colons + 2);
  return {readable, identifier};
}

// A mangled name the demangler refused (truncated by a tracer, or a compiler's extension): its
// leading <nested-name> read by hand, "_ZN2at6native13reduce_kernelI..." ->
// at::native::reduce_kernel.
std::optional<KernelName> from_mangled_prefix(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return std::nullopt;
  std::size_t at = 2;
  if (at < name.size() && name[at] == 'L') ++at;
  const bool nested = at < name.size() && name[at] == 'N';
  if (nested) {
    ++at;
    while (at < name.size() && (name[at] == 'r' || name[at] == 'V' || name[at] == 'K')) ++at;
  }
  std::vector<std::string> parts;
  while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) {
    std::size_t length = 0;
    while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at])))
      length = length * 10 + static_cast<std::size_t>(name[at++] - '0');
    if (length == 0 || at + length > name.size()) return std::nullopt;
    parts.push_back(name.substr(at, length));
    at += length;
    if (!nested) break;
  }
  if (parts.empty()) return std::nullopt;
  std::string readable;
  for (const auto& part : parts) readable += (readable.empty() ? "" : "::") + part;
  if (at < name.size() && name[at] == 'I') readable += "<...>";
  return KernelName{readable, parts.back()};
}

}  // namespace

KernelName read_kernel_name(const std::string& traced) {
  if (const auto text = demangle(traced)) return from_demangled(*text);
  if (auto prefix = from_mangled_prefix(traced)) return *prefix;
  // extern "C" and Triton kernels: the name as it is.
  return from_demangled(traced);
}

}  // namespace cudal1
