// What the process and sandbox tests ask of the system about their children.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cudal1/common/paths.hpp"

namespace cudal1::test_support {

// Running (not dead and not a zombie waiting for a reaper).
inline bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

// A private directory of its own under the system's temporary folder.
inline std::filesystem::path scratch(const std::string& prefix, const std::string& name) {
  return make_private_directory(std::filesystem::temp_directory_path(), prefix + name + "-");
}

}  // namespace cudal1::test_support
