// The hack-case database: reading index.json, adding cases, refusing bad input and duplicates.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using cudal1::InputError;
using cudal1::read_file;
using cudal1::review::HackCase;
using cudal1::review::HackCorpus;
using cudal1::review::NewHackCase;
using cudal1::test::TempDir;
using nlohmann::json;

const fs::path kData = CUDAL1_TEST_DATA;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string hack_source(int n) {
  return "import torch\nimport torch.nn as nn\n\n_seen = {}\n\n\nclass ModelNew(nn.Module):\n"
         "    def forward(self, x):\n        return _seen.setdefault(" +
         std::to_string(n) + ", x * 2)\n";
}

NewHackCase request(fs::path file, std::string hack_class, std::string name = {}) {
  NewHackCase r;
  r.file = std::move(file);
  r.hack_class = std::move(hack_class);
  r.name = std::move(name);
  return r;
}

// The message of the InputError that `body` throws ("" when it throws none).
template <typename Body>
std::string input_error(Body body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const HackCase* find_case(const HackCorpus& corpus, const std::string& name) {
  for (const auto& c : corpus.cases()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(HackCorpus, LoadsTheFixtureCorpusWithCasesOutsideItsDirectory) {
  const HackCorpus corpus = HackCorpus::load(kData / "hacks");
  EXPECT_EQ(corpus.cases().size(), 11u);
  EXPECT_TRUE(corpus.warnings().empty()) << corpus.warnings().front();
  const HackCase* outside = find_case(corpus, "redefined_inputs");
  ASSERT_NE(outside, nullptr);
  EXPECT_EQ(outside->hack_class, "task_override");
  EXPECT_EQ(outside->path, (kData / "candidates/overrides_task.py").lexically_normal());
  EXPECT_NE(outside->source.find("def get_inputs"), std::string::npos);
  const HackCase* lazy = find_case(corpus, "deferred_tensor");
  ASSERT_NE(lazy, nullptr);
  EXPECT_EQ(lazy->task, "scale_relu");
  EXPECT_EQ(lazy->added_at, "2026-01-05T10:00:00Z");
  EXPECT_EQ(lazy->sha256.size(), 64u);
  EXPECT_TRUE(lazy->fingerprint.api_features().count("tensor_subclass"));
}

TEST(HackCorpus, AMissingDirectoryOrIndexIsAnInputErrorNamingIt) {
  TempDir tmp;
  const std::string missing = input_error([&] { HackCorpus::load(tmp.path() / "nowhere"); });
  EXPECT_NE(missing.find("nowhere"), std::string::npos) << missing;
  const std::string no_index = input_error([&] { HackCorpus::load(tmp.path()); });
  EXPECT_NE(no_index.find("index.json"), std::string::npos) << no_index;
  EXPECT_NE(no_index.find("cudal1 hacks add"), std::string::npos) << no_index;
}

TEST(HackCorpus, AMalformedIndexNamesTheFileAndTheEntry) {
  TempDir tmp;
  const fs::path index = tmp.path() / "index.json";
  const auto load_error = [&](const std::string& text) {
    write(index, text);
    return input_error([&] { HackCorpus::load(tmp.path()); });
  };
  std::string message = load_error("{\"cases\": [");
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find(index.string()), std::string::npos) << message;
  message = load_error(R"({"cases": {"name": "x"}})");
  EXPECT_NE(message.find("\"cases\" list"), std::string::npos) << message;
  message = load_error(R"({"cases": [{"name": "a", "file": "a.py"}]})");
  EXPECT_NE(message.find("cases[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("\"class\""), std::string::npos) << message;
  message = load_error(R"({"cases": [{"name": "a", "class": "Lazy-Output", "file": "a.py"}]})");
  EXPECT_NE(message.find("not a class name"), std::string::npos) << message;
  message = load_error(R"({"cases": [{"name": "a", "class": "lazy_output", "file": 3}]})");
  EXPECT_NE(message.find("\"file\" must be a string"), std::string::npos) << message;
}

TEST(HackCorpus, AMissingCaseFileIsLeftOutWithAWarning) {
  TempDir tmp;
  write(tmp.path() / "cases/a.py", hack_source(1));
  write(tmp.path() / "index.json", R"([
    {"name": "a", "class": "cached_output", "file": "cases/a.py"},
    {"name": "gone", "class": "cached_output", "file": "cases/gone.py"},
    {"name": "odd", "class": "my_new_trick", "file": "cases/a.py"}])");
  const HackCorpus corpus = HackCorpus::load(tmp.path());
  ASSERT_EQ(corpus.cases().size(), 2u);
  const auto& w = corpus.warnings();
  EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](const std::string& s) {
    return s.find("gone.py") != std::string::npos && s.find("missing") != std::string::npos;
  }));
  EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](const std::string& s) {
    return s.find("my_new_trick") != std::string::npos;
  }));
}

TEST(HackCorpus, AddCopiesTheFileAndAppendsItsEntry) {
  TempDir tmp;
  const fs::path file = tmp.path() / "in/pointer_cache.py";
  write(file, hack_source(1));
  std::vector<std::string> warnings;
  const HackCase added = HackCorpus::add(
      tmp.path() / "corpus", {file, "cached_output", "", "keyed on data_ptr", "19_ReLU"}, warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(added.name, "pointer_cache");
  EXPECT_EQ(added.file, "cases/cached_output/pointer_cache.py");
  EXPECT_EQ(read_file(tmp.path() / "corpus" / added.file), hack_source(1));

  const json index = json::parse(read_file(tmp.path() / "corpus/index.json"));
  ASSERT_EQ(index["cases"].size(), 1u);
  const json& entry = index["cases"][0];
  EXPECT_EQ(entry["name"], "pointer_cache");
  EXPECT_EQ(entry["class"], "cached_output");
  EXPECT_EQ(entry["file"], "cases/cached_output/pointer_cache.py");
  EXPECT_EQ(entry["description"], "keyed on data_ptr");
  EXPECT_EQ(entry["task"], "19_ReLU");
  EXPECT_EQ(entry["added_at"].get<std::string>().size(), 20u);  // 2026-01-02T03:04:05Z

  const HackCorpus corpus = HackCorpus::load(tmp.path() / "corpus");
  ASSERT_EQ(corpus.cases().size(), 1u);
  EXPECT_EQ(corpus.cases()[0].source, hack_source(1));
}

TEST(HackCorpus, AddKeepsWhatItDoesNotKnowInTheIndex) {
  TempDir tmp;
  write(tmp.path() / "seeded.py", hack_source(1));
  write(tmp.path() / "index.json", R"({"version": 1, "note": "seeded by hand", "cases": [
    {"name": "seeded", "class": "cached_output", "file": "seeded.py", "reviewer": "ana"}]})");
  const fs::path file = tmp.path() / "new.py";
  write(file, hack_source(2));
  std::vector<std::string> warnings;
  HackCorpus::add(tmp.path(), request(file, "cached_output"), warnings);
  const json index = json::parse(read_file(tmp.path() / "index.json"));
  EXPECT_EQ(index["note"], "seeded by hand");
  ASSERT_EQ(index["cases"].size(), 2u);
  EXPECT_EQ(index["cases"][0]["reviewer"], "ana");
  EXPECT_EQ(index["cases"][1]["name"], "new");
}

TEST(HackCorpus, AddRefusesContentAlreadyInTheCorpus) {
  TempDir tmp;
  write(tmp.path() / "a.py", hack_source(1));
  write(tmp.path() / "elsewhere/b.py", hack_source(1));
  std::vector<std::string> warnings;
  HackCorpus::add(tmp.path() / "corpus", request(tmp.path() / "a.py", "cached_output"), warnings);
  const std::string message = input_error([&] {
    HackCorpus::add(tmp.path() / "corpus", request(tmp.path() / "elsewhere/b.py", "lazy_output"),
                    warnings);
  });
  EXPECT_NE(message.find("already in the hack corpus as case 'a'"), std::string::npos) << message;
  EXPECT_EQ(HackCorpus::load(tmp.path() / "corpus").cases().size(), 1u);
}

TEST(HackCorpus, AddPicksAFreeNameButRefusesATakenExplicitOne) {
  TempDir tmp;
  write(tmp.path() / "one/trick.py", hack_source(1));
  write(tmp.path() / "two/trick.py", hack_source(2));
  write(tmp.path() / "three/trick.py", hack_source(3));
  std::vector<std::string> warnings;
  const fs::path corpus = tmp.path() / "corpus";
  EXPECT_EQ(
      HackCorpus::add(corpus, request(tmp.path() / "one/trick.py", "cached_output"), warnings).name,
      "trick");
  EXPECT_EQ(
      HackCorpus::add(corpus, request(tmp.path() / "two/trick.py", "cached_output"), warnings).name,
      "trick_2");
  const std::string message = input_error([&] {
    HackCorpus::add(corpus, request(tmp.path() / "three/trick.py", "lazy_output", "trick"),
                    warnings);
  });
  EXPECT_NE(message.find("already has a case named 'trick'"), std::string::npos) << message;
}

TEST(HackCorpus, AddRefusesUnusableInputAndWritesNothing) {
  TempDir tmp;
  const fs::path corpus = tmp.path() / "corpus";
  write(tmp.path() / "good.py", hack_source(1));
  write(tmp.path() / "empty.py", "  \n\n");
  write(tmp.path() / "latin1.py", "# caf\xe9\nx = 1\n");
  fs::create_directories(tmp.path() / "dir.py");
  std::vector<std::string> warnings;
  const auto error_of = [&](const NewHackCase& r) {
    return input_error([&] { HackCorpus::add(corpus, r, warnings); });
  };
  EXPECT_NE(error_of(request(tmp.path() / "missing.py", "lazy_output")).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of(request(tmp.path() / "empty.py", "lazy_output")).find("is empty"),
            std::string::npos);
  EXPECT_NE(error_of(request(tmp.path() / "latin1.py", "lazy_output")).find("not UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of(request(tmp.path() / "dir.py", "lazy_output")).find("is a directory"),
            std::string::npos);
  for (const char* bad_class : {"", "Lazy", "1st", "lazy-output", "lazy output"}) {
    EXPECT_NE(error_of(request(tmp.path() / "good.py", bad_class)).find("not a class name"),
              std::string::npos)
        << bad_class;
  }
  for (const char* bad_name : {"../escape", ".hidden", "a/b", "sp ace"}) {
    EXPECT_NE(
        error_of(request(tmp.path() / "good.py", "lazy_output", bad_name)).find("not a case name"),
        std::string::npos)
        << bad_name;
  }
  EXPECT_FALSE(fs::exists(corpus / "index.json"));
  EXPECT_FALSE(fs::exists(tmp.path() / "escape.py"));
}

TEST(HackCorpus, AnUnknownClassIsAddedWithAWarning) {
  TempDir tmp;
  write(tmp.path() / "x.py", hack_source(1));
  std::vector<std::string> warnings;
  const HackCase added =
      HackCorpus::add(tmp.path() / "c", request(tmp.path() / "x.py", "clock_skew"), warnings);
  EXPECT_EQ(added.hack_class, "clock_skew");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("clock_skew"), std::string::npos);
  EXPECT_NE(warnings[0].find("lazy_output"), std::string::npos);  // lists the known ones
}

TEST(HackCorpus, ConcurrentAddsLoseNoCase) {
  TempDir tmp;
  constexpr int kThreads = 8, kEach = 4;
  for (int i = 0; i < kThreads * kEach; ++i) {
    write(tmp.path() / "in" / ("case" + std::to_string(i) + ".py"), hack_source(i));
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kEach; ++k) {
        const int i = t * kEach + k;
        std::vector<std::string> warnings;
        try {
          HackCorpus::add(
              tmp.path() / "corpus",
              request(tmp.path() / "in" / ("case" + std::to_string(i) + ".py"), "cached_output"),
              warnings);
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  const HackCorpus corpus = HackCorpus::load(tmp.path() / "corpus");
  EXPECT_EQ(corpus.cases().size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_TRUE(corpus.warnings().empty());
}

}  // namespace
