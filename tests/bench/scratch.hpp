// A scratch directory per test, with files and links made in one line each.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cudal1/common/error.hpp"
#include "cudal1/common/paths.hpp"

namespace cudal1::bench::testing {

class Scratch {
 public:
  Scratch()
      : root_(
            make_private_directory(std::filesystem::temp_directory_path(), "cudal1-bench-test-")) {}
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path path(const std::string& relative) const { return root_ / relative; }

  std::filesystem::path write(const std::string& relative, const std::string& content) const {
    const auto file = path(relative);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }
  void link(const std::string& relative, const std::string& target) const {
    std::filesystem::create_directories(path(relative).parent_path());
    std::filesystem::create_symlink(target, path(relative));
  }
  void mkdir(const std::string& relative) const {
    std::filesystem::create_directories(path(relative));
  }

 private:
  std::filesystem::path root_;
};

// EXPECT_CONTAINS(text, part): the message shows both when `part` is not in `text`.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' is not in:\n" << text;
}
#define EXPECT_CONTAINS(text, part) EXPECT_TRUE(::cudal1::bench::testing::contains((text), (part)))

// Runs `body`, which must throw InputError, and returns the message ("" and a failure if not).
template <typename Body>
std::string input_error(Body body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected an InputError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an InputError, nothing was thrown";
  return "";
}

}  // namespace cudal1::bench::testing
