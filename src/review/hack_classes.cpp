// The vocabulary of hack classes: the hack classes of the flag table (cudal1/eval/flags.hpp).
#include <algorithm>
#include <cctype>
#include <vector>

#include "cudal1/eval/flags.hpp"
#include "cudal1/review/hack_corpus.hpp"

namespace cudal1::review {

std::span<const HackClassInfo> known_hack_classes() {
  // The hack classes of the flag table (cudal1/eval/flags.hpp), in its order.
  static const std::vector<HackClassInfo> classes = [] {
    std::vector<HackClassInfo> out;
    for (const FlagInfo& f : flag_table()) {
      if (f.hack_class) out.push_back({f.name, f.description});
    }
    return out;
  }();
  return classes;
}

bool is_known_hack_class(std::string_view name) {
  const FlagInfo* info = find_flag(name);
  return info != nullptr && info->hack_class;
}

bool is_valid_hack_class(std::string_view name) {
  constexpr std::size_t kMaxLength = 64;
  if (name.empty() || name.size() > kMaxLength) return false;
  if (!std::islower(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace cudal1::review
