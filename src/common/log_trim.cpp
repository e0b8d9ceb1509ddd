#include "cudal1/common/log_trim.hpp"

#include <fmt/format.h>

#include "cudal1/common/text_file.hpp"

namespace cudal1 {

std::string trim_log(std::string_view text, std::size_t head, std::size_t tail) {
  // Logs end up inside JSON verdicts, which must be valid UTF-8; a cut may also split a character.
  if (text.size() <= head + tail) return sanitize_utf8(text);
  std::size_t head_end = head;
  if (auto nl = text.rfind('\n', head); nl != std::string_view::npos && nl > head / 2)
    head_end = nl + 1;
  std::size_t tail_begin = text.size() - tail;
  if (auto nl = text.find('\n', tail_begin);
      nl != std::string_view::npos && nl < tail_begin + tail / 2) {
    tail_begin = nl + 1;
  }
  return sanitize_utf8(text.substr(0, head_end)) +
         fmt::format("[... {} bytes omitted ...]\n", tail_begin - head_end) +
         sanitize_utf8(text.substr(tail_begin));
}

std::string trim_log_file(const std::filesystem::path& path, std::size_t head, std::size_t tail) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  try {
    return trim_log(read_file(path), head, tail);
  } catch (const std::exception&) {
    return {};
  }
}

std::string first_line(std::string_view text, std::size_t limit) {
  std::string line(text.substr(0, text.find('\n')));
  if (line.size() > limit) line = line.substr(0, limit) + "...";
  return line;
}

}  // namespace cudal1
