#include "cudal1/task/suite.hpp"

#include <gtest/gtest.h>

#include "cudal1/common/error.hpp"
#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using testing::input_error;
using testing::Scratch;

constexpr const char* kTask = "class Model: pass\n";

TEST(SuiteTest, ReadsLevelsInOrderAndKeepsLinks) {
  Scratch dir;
  dir.write("tasks/gelu.py", kTask);
  dir.write("suite/level2/10_Conv.py", kTask);
  dir.write("suite/level2/2_Linear.py", kTask);
  dir.write("suite/level1/3_Relu.py", kTask);
  dir.link("suite/level1/1_Gelu.py", "../../tasks/gelu.py");
  dir.write("suite/level1/README.md", "not a task");
  dir.write("suite/level1/__init__.py", "");
  dir.write("suite/notes.txt", "ignored");
  dir.mkdir("suite/level1/__pycache__");

  const Suite suite = Suite::load(dir.path("suite"));
  ASSERT_EQ(suite.tasks.size(), 4u);
  EXPECT_EQ(suite.root, dir.path("suite"));
  EXPECT_EQ(suite.tasks[0].key(), "level1/1_Gelu");
  EXPECT_EQ(suite.tasks[1].key(), "level1/3_Relu");
  EXPECT_EQ(suite.tasks[2].key(), "level2/2_Linear");  // ids sort as numbers, not text
  EXPECT_EQ(suite.tasks[3].key(), "level2/10_Conv");
  EXPECT_EQ(suite.tasks[3].ref, (TaskRef{2, 10}));
  // The link itself is the task file: results name the file in the suite.
  EXPECT_EQ(suite.tasks[0].file, dir.path("suite/level1/1_Gelu.py"));
  EXPECT_TRUE(suite.tasks[0].file.is_absolute());
  EXPECT_EQ(suite.levels(), (std::vector<int>{1, 2}));
  ASSERT_NE(suite.find({2, 10}), nullptr);
  EXPECT_EQ(suite.find({2, 10})->name, "10_Conv");
  EXPECT_EQ(suite.find({3, 1}), nullptr);
}

TEST(SuiteTest, SelectsLevelsThenLimit) {
  Scratch dir;
  for (const char* file : {"level1/1_A.py", "level1/2_B.py", "level2/1_C.py", "level3/1_D.py"}) {
    dir.write(std::string("suite/") + file, kTask);
  }
  const Suite suite = Suite::load(dir.path("suite"));
  const Suite some = suite.select({3, 2}, 0);
  ASSERT_EQ(some.tasks.size(), 2u);
  EXPECT_EQ(some.tasks[0].key(), "level2/1_C");
  EXPECT_EQ(some.tasks[1].key(), "level3/1_D");
  const Suite first = suite.select({}, 3);
  ASSERT_EQ(first.tasks.size(), 3u);
  EXPECT_EQ(first.tasks[2].key(), "level2/1_C");
  EXPECT_EQ(suite.select({1}, 1).tasks.size(), 1u);
  EXPECT_CONTAINS(input_error([&] { suite.select({4}, 0); }), "no task in level4/");
}

TEST(SuiteTest, MissingDirectory) {
  Scratch dir;
  const std::string message = input_error([&] { Suite::load(dir.path("nowhere")); });
  EXPECT_CONTAINS(message, dir.path("nowhere").string());
  EXPECT_CONTAINS(message, "does not exist");
}

TEST(SuiteTest, FileInsteadOfDirectory) {
  Scratch dir;
  dir.write("suite.py", kTask);
  EXPECT_CONTAINS(input_error([&] { Suite::load(dir.path("suite.py")); }), "is not a directory");
}

TEST(SuiteTest, NoLevelDirectories) {
  Scratch dir;
  dir.write("suite/1_Gelu.py", kTask);
  dir.mkdir("suite/levels");
  const std::string message = input_error([&] { Suite::load(dir.path("suite")); });
  EXPECT_CONTAINS(message, "no level directories");
  EXPECT_CONTAINS(message, dir.path("suite").string());
}

TEST(SuiteTest, LevelDirectoriesWithoutTasks) {
  Scratch dir;
  dir.mkdir("suite/level1");
  dir.write("suite/level2/README.md", "");
  EXPECT_CONTAINS(input_error([&] { Suite::load(dir.path("suite")); }), "no task files");
}

TEST(SuiteTest, FileNameOutsideTheLayout) {
  Scratch dir;
  dir.write("suite/level1/1_Gelu.py", kTask);
  dir.write("suite/level1/gelu_tanh.py", kTask);
  const std::string message = input_error([&] { Suite::load(dir.path("suite")); });
  EXPECT_CONTAINS(message, dir.path("suite/level1/gelu_tanh.py").string());
  EXPECT_CONTAINS(message, "<task_id>_<Name>.py");
}

TEST(SuiteTest, DuplicateTaskIds) {
  Scratch dir;
  dir.write("suite/level2/7_Foo.py", kTask);
  dir.write("suite/level2/7_Bar.py", kTask);
  dir.write("suite/level1/7_Other.py", kTask);  // same id in another level is fine
  const std::string message = input_error([&] { Suite::load(dir.path("suite")); });
  EXPECT_CONTAINS(message, "7_Foo.py");
  EXPECT_CONTAINS(message, "7_Bar.py");
  EXPECT_CONTAINS(message, "task id 7 in level 2");
}

TEST(SuiteTest, BrokenLink) {
  Scratch dir;
  dir.link("suite/level1/1_Gone.py", "../../tasks/gone.py");
  const std::string message = input_error([&] { Suite::load(dir.path("suite")); });
  EXPECT_CONTAINS(message, "1_Gone.py");
  EXPECT_CONTAINS(message, "broken symbolic link");
}

TEST(SuiteTest, ParsesFileNames) {
  EXPECT_EQ(parse_layout_file_name("3_GeluTanh.py"), std::make_pair(3, std::string("3_GeluTanh")));
  EXPECT_EQ(parse_layout_file_name("12_Conv_2D_relu.py"),
            std::make_pair(12, std::string("12_Conv_2D_relu")));
  EXPECT_FALSE(parse_layout_file_name("GeluTanh.py"));
  EXPECT_FALSE(parse_layout_file_name("3_.py"));
  EXPECT_FALSE(parse_layout_file_name("3_Gelu.txt"));
  EXPECT_FALSE(parse_layout_file_name("x3_Gelu.py"));
}

TEST(SuiteTest, ParsesLevelLists) {
  EXPECT_EQ(parse_levels("1,2"), (std::vector<int>{1, 2}));
  EXPECT_EQ(parse_levels(" 3 , 1,3"), (std::vector<int>{3, 1}));
  for (const char* bad : {"", "1,", "one", "1;2", "0", "-1", "1.5"}) {
    EXPECT_CONTAINS(input_error([&] { parse_levels(bad); }), "--levels") << bad;
  }
}

}  // namespace
}  // namespace cudal1::bench
