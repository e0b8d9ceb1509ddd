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
  c.exemplars = {{7, "class ModelNew: pass  # FAST", 2.5, false, std::nullopt},
                 {1, "class Model: pass  # REFERENCE", 1.0, true, std::nullopt}};
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

TEST(ContrastivePrompt, ExemplarsSayWhereTheirTimeGoes) {
  const nlohmann::json verdict = {
      {"candidate_ms", 0.215},
      {"reference_ms", 7.8},
      {"speed_of_light", {{"bytes", 805e6}, {"bandwidth_gbs", 4800.0}}},
      {"timing",
       {{"activity",
         {{"candidate",
           {{"busy_ms_median", 0.21},
            {"kernels_per_call", 2},
            {"top_kernels",
             {{{"name", "ln_normalize_kernel<true>"}, {"share", 0.93}, {"own", true}},
              {{"name", "colsum_kernel"}, {"share", 0.05}, {"own", true}},
              {{"name", "at::native::fill"}, {"share", 0.01}, {"own", false}},
              {{"name", "fourth"}, {"share", 0.01}, {"own", false}}}}}}}}}}};
  PromptContext c = sample_context();
  c.exemplars[0].profile = profile_of(verdict, "candidate");
  const PromptLibrary library = PromptLibrary::load(CUDAL1_PROMPTS_DIR);

  c.profile_detail = ProfileDetail::kFull;
  std::string user = library.render_user_message(c);
  for (const char* needle :
       {"Measured: 215.0 us per call; moves 805.0 MB", "78% of the measured 4.80 TB/s",
        "memory-bound near the roof",
        "- 93% of the kernel time in `ln_normalize_kernel<true>` "
        "(its own kernel)",
        "(its own kernel)\n- 5% of the kernel time in `colsum_kernel` (its own kernel)\n",
        "- 1% of the kernel time in `at::native::fill`\n\n```python"}) {
    EXPECT_NE(user.find(needle), std::string::npos) << needle << "\n" << user;
  }
  EXPECT_EQ(user.find("fourth"), std::string::npos) << "three kernels at most";
  // Only the exemplar with a profile says "Measured".
  EXPECT_EQ(user.find("Measured:"), user.rfind("Measured:"));

  c.profile_detail = ProfileDetail::kSummary;
  user = library.render_user_message(c);
  EXPECT_NE(user.find("memory-bound near the roof"), std::string::npos);
  EXPECT_EQ(user.find("ln_normalize_kernel"), std::string::npos);

  c.profile_detail = ProfileDetail::kNone;
  user = library.render_user_message(c);
  EXPECT_EQ(user.find("Measured:"), std::string::npos);
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
