#include "cudal1/common/text_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <system_error>

#include "cudal1/common/error.hpp"

namespace cudal1 {

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      code = c & 0x07;
    } else {
      return i;
    }
    if (i + length > n) return i;
    for (std::size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    // Overlong encodings, UTF-16 surrogates and values past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return i;
    i += length;
  }
  return std::nullopt;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto bad = first_invalid_utf8(text);
    if (!bad) {
      out += text;
      break;
    }
    out += text.substr(0, *bad);
    out += '?';
    text.remove_prefix(*bad + 1);
  }
  return out;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open {}", path.string()));
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string read_source_file(const std::filesystem::path& path, std::string_view role) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw InputError(fmt::format("{} file '{}' does not exist", role, path.string()),
                     subject_of_role(role));
  }
  if (std::filesystem::is_directory(status)) {
    throw InputError(
        fmt::format("{} file '{}' is a directory; pass the .py file itself", role, path.string()),
        subject_of_role(role));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw InputError(
        fmt::format("{} file '{}' is not readable (check its permissions)", role, path.string()),
        subject_of_role(role));
  }
  std::string content;
  try {
    content = read_file(path);
  } catch (const std::exception&) {
    throw InputError(fmt::format("{} file '{}' cannot be read", role, path.string()),
                     subject_of_role(role));
  }
  const bool blank = std::all_of(content.begin(), content.end(), [](unsigned char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
  });
  if (blank)
    throw InputError(fmt::format("{} file '{}' is empty", role, path.string()),
                     subject_of_role(role));
  if (auto bad = first_invalid_utf8(content)) {
    const auto line =
        1 + std::count(content.begin(), content.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
    throw InputError(
        fmt::format("{} file '{}' is not UTF-8 text (invalid byte 0x{:02x} on line {}); "
                    "save it as UTF-8",
                    role, path.string(), static_cast<unsigned char>(content[*bad]), line),
        subject_of_role(role));
  }
  return content;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  auto temporary = path;
  static std::atomic<unsigned> counter{0};
  temporary += fmt::format(".tmp{}.{}", ::getpid(), counter++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", temporary.string()));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out.flush()) throw std::runtime_error(fmt::format("cannot write {}", temporary.string()));
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace cudal1
