#include "cudal1/search/contrastive_prompt.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace cudal1::search {
namespace {

PromptContext sample_context() {
  PromptContext c;
  c.task_name = "scale_relu";
  c.reference_code = "class Model: pass  # REFERENCE";
  c.device = "an NVIDIA H200";
  c.tolerance = "atol=1e-4, rtol=1e-4";
  c.exemplars = {{7, "class ModelNew: pass  # FAST", 2.5, false},
                 {1, "class Model: pass  # REFERENCE", 1.0, true}};
  c.failures = {{"class ModelNew: broken", "compile_error", "error: expected ';'"}};
  return c;
}

TEST(ContrastivePrompt, ShowsReferenceExemplarsSpeedupsAndProtocol) {
  const PromptLibrary library = PromptLibrary::load(CUDAL1_PROMPTS_DIR);
  const auto request = library.build(sample_context(), "qwen", 0.6, 4096);
  ASSERT_EQ(request.messages.size(), 2u);
  EXPECT_EQ(request.messages[0].role, "system");
  EXPECT_EQ(request.model, "qwen");
  EXPECT_EQ(request.max_tokens, 4096);
  const std::string& user = request.messages[1].content;
  for (const char* needle :
       {"scale_relu", "an NVIDIA H200", "# FAST", "speedup 2.50x", "speedup 1.00x",
        "## Performance Analysis", "## Algorithm Design", "## Code Implementation",
        "atol=1e-4, rtol=1e-4", "compile_error", "error: expected ';'", "class ModelNew(nn.Module)",
        "No caching or reuse"}) {
    EXPECT_NE(user.find(needle), std::string::npos) << needle;
  }
  // Slowest first: the reference (1.00x) precedes the 2.50x implementation.
  EXPECT_LT(user.find("speedup 1.00x"), user.find("speedup 2.50x"));
  EXPECT_EQ(user.find("{{"), std::string::npos);
}

TEST(ContrastivePrompt, MissingTemplateFileIsNamed) {
  try {
    PromptLibrary::load("/nonexistent-prompts-dir");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-prompts-dir/system.md"), std::string::npos)
        << e.what();
  }
}

TEST(ContrastivePrompt, EditedTemplatesAreUsed) {
  const auto dir = std::filesystem::temp_directory_path() / "cudal1-prompt-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "system.md") << "SYS";
  std::ofstream(dir / "contrastive.md")
      << "T={{task_name}} {{#exemplars}}[{{label}}:{{speedup}}]{{/exemplars}}";
  const auto request = PromptLibrary::load(dir).build(sample_context(), "m", 0.1, std::nullopt);
  EXPECT_EQ(request.messages[0].content, "SYS");
  EXPECT_EQ(request.messages[1].content, "T=scale_relu [A:1.0][B:2.5]");
  std::filesystem::remove_all(dir);
}

TEST(ContrastivePrompt, BrokenTemplateFailsAtLoad) {
  const auto dir = std::filesystem::temp_directory_path() / "cudal1-prompt-broken";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "system.md") << "SYS";
  std::ofstream(dir / "contrastive.md") << "{{#exemplars}} never closed";
  EXPECT_THROW(PromptLibrary::load(dir), std::runtime_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cudal1::search
