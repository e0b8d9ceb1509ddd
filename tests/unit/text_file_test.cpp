#include "cudal1/common/text_file.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"

namespace cudal1 {
namespace {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cudal1-text-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return dir_ / name;
  }
  std::string error_of(const std::filesystem::path& path) {
    try {
      read_source_file(path, "task");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST(Utf8, AcceptsValidText) {
  EXPECT_FALSE(first_invalid_utf8("plain ascii\n"));
  EXPECT_FALSE(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
}

TEST(Utf8, RejectsInvalidSequences) {
  EXPECT_EQ(first_invalid_utf8("ab\xe9z"), 2u);           // Latin-1 é
  EXPECT_EQ(first_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xed\xa0\x80"), 1u);     // UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xe2\x82"), 2u);        // truncated
}

TEST(Utf8, SanitizeReplacesOnlyBadBytes) {
  EXPECT_EQ(sanitize_utf8("a\xffz\xc3\xa9"), "a?z\xc3\xa9");
}

TEST_F(TempDir, ReadsAValidFile) {
  const auto path = write("task.py", "import torch\n");
  EXPECT_EQ(read_source_file(path, "task"), "import torch\n");
}

TEST_F(TempDir, NamesTheProblemAndTheFile) {
  const auto missing = error_of(dir_ / "missing.py");
  EXPECT_NE(missing.find("missing.py"), std::string::npos);
  EXPECT_NE(missing.find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(dir_).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of(write("empty.py", "")).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(write("blank.py", "  \n\t\n")).find("is empty"), std::string::npos);
  const auto latin = error_of(write("latin.py", "# ok\n# caf\xe9\n"));
  EXPECT_NE(latin.find("not UTF-8"), std::string::npos);
  EXPECT_NE(latin.find("line 2"), std::string::npos);
}

TEST(LogTrim, KeepsHeadAndTailOfLongLogs) {
  std::string log;
  for (int i = 0; i < 2000; ++i) log += "line " + std::to_string(i) + "\n";
  const std::string trimmed = trim_log(log, 100, 200);
  EXPECT_LT(trimmed.size(), 400u);
  EXPECT_EQ(trimmed.rfind("line 0\n", 0), 0u);
  EXPECT_NE(trimmed.find("line 1999\n"), std::string::npos);
  EXPECT_NE(trimmed.find("bytes omitted"), std::string::npos);
  EXPECT_EQ(trim_log("short", 100, 200), "short");
}

}  // namespace
}  // namespace cudal1
