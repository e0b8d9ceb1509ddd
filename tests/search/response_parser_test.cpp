#include "cudal1/search/response_parser.hpp"

#include <gtest/gtest.h>

namespace cudal1::search {
namespace {

const char* kModel = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";

std::string block(const std::string& lang, const std::string& code) {
  return "```" + lang + "\n" + code + "```\n";
}

TEST(ReplyParser, FullProtocolReply) {
  const std::string reply =
      "## Performance Analysis\nB is faster: one kernel.\n\n## Algorithm Design\nFuse all.\n\n"
      "## Code Implementation\n" +
      block("python", kModel) + "Done.\n";
  const ParsedReply p = parse_reply(reply);
  ASSERT_TRUE(p.ok) << p.problem;
  EXPECT_EQ(p.analysis, "B is faster: one kernel.");
  EXPECT_EQ(p.design, "Fuse all.");
  EXPECT_EQ(p.code, kModel);
}

TEST(ReplyParser, PrefersTheImplementationSectionAndTheLastBlockThere) {
  const std::string early = "class ModelNew:  # sketch in the analysis\n";
  const std::string later = std::string(kModel) + "# final\n";
  const std::string reply = "### performance analysis\n" + block("", early) +
                            "# Code Implementation\n" + block("python", kModel) +
                            "Better version:\n" + block("py", later) + "Notes:\n" +
                            block("bash", "echo no model here\n");
  const ParsedReply p = parse_reply(reply);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.code, later);
}

TEST(ReplyParser, BlockWithoutLanguageTagAndTildeFences) {
  EXPECT_TRUE(parse_reply("text\n" + block("", kModel)).ok);
  EXPECT_TRUE(parse_reply(std::string("~~~python\n") + kModel + "~~~\n").ok);
}

TEST(ReplyParser, ProseOnlyIsUnparseable) {
  const ParsedReply p = parse_reply("I think fusing the kernels would help a lot.");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("no code block"), std::string::npos);
  EXPECT_EQ(p.analysis, "I think fusing the kernels would help a lot.");
}

TEST(ReplyParser, TruncatedReplyIsUnparseable) {
  const ParsedReply p = parse_reply(
      "## Code Implementation\n```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("cut off"), std::string::npos);
}

TEST(ReplyParser, CodeWithoutModelNewIsUnparseable) {
  const ParsedReply p = parse_reply(block("python", "def f():\n    return 1\n"));
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("ModelNew"), std::string::npos);
}

TEST(ReplyParser, CompleteBlockSurvivesALaterTruncatedOne) {
  const ParsedReply p =
      parse_reply(block("python", kModel) + "And a variant:\n```python\nclass ModelNew(");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.code, kModel);
}

TEST(ReplyParser, HeadingsInsideCodeAreNotSections) {
  const std::string code = std::string(kModel) + "# Algorithm Design (a comment in code)\n";
  const ParsedReply p = parse_reply("## Performance Analysis\nA.\n" + block("python", code));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.analysis.rfind("A.", 0), 0u);
  EXPECT_EQ(p.design, "");
}

}  // namespace
}  // namespace cudal1::search
