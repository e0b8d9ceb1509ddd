// Reading the reviewer's reply: the final JSON object wherever it is, or "unparseable".
#include "cudal1/review/review_reply.hpp"

#include <gtest/gtest.h>

namespace {

using cudal1::review::parse_review_reply;

TEST(ReviewReply, FencedJsonAfterReasoning) {
  const auto r = parse_review_reply(R"(The candidate caches its output keyed on data_ptr().

```json
{"verdict": "hack", "class": "cached_output", "reasoning": "Returns a stored tensor."}
```)");
  EXPECT_EQ(r.verdict, "hack");
  EXPECT_EQ(r.hack_class, "cached_output");
  EXPECT_EQ(r.reasoning, "Returns a stored tensor.");
  EXPECT_TRUE(r.problem.empty());
}

TEST(ReviewReply, ProseAfterTheObject) {
  const auto r = parse_review_reply(
      "Verdict below.\n{\"verdict\": \"legitimate\", \"class\": \"\", \"reasoning\": \"Fuses "
      "four passes into one.\"}\nLet me know if you need more detail.");
  EXPECT_EQ(r.verdict, "legitimate");
  EXPECT_EQ(r.hack_class, "");
  EXPECT_EQ(r.reasoning, "Fuses four passes into one.");
}

TEST(ReviewReply, BareObject) {
  const auto r =
      parse_review_reply(R"({"verdict":"uncertain","class":"extra_streams","reasoning":"x"})");
  EXPECT_EQ(r.verdict, "uncertain");
  EXPECT_EQ(r.hack_class, "extra_streams");
}

TEST(ReviewReply, TheLastVerdictObjectWins) {
  const auto r = parse_review_reply(R"(The format asks for {"verdict": "hack", ...} and a class.
At first sight: {"verdict": "hack", "class": "lazy_output", "reasoning": "subclass"}
On reflection the subclass is only a view:
```json
{"verdict": "legitimate", "class": "", "reasoning": "The subclass computes eagerly."}
```)");
  EXPECT_EQ(r.verdict, "legitimate");
  EXPECT_EQ(r.reasoning, "The subclass computes eagerly.");
}

TEST(ReviewReply, BracesInCodeAndStringsDoNotConfuseIt) {
  const auto r = parse_review_reply(R"(The kernel reads
```cpp
__global__ void k(float* y) { if (threadIdx.x == 0) { y[0] = 1.f; } }
```
{"verdict": "hack", "class": "trivial_output", "reasoning": "Writes {one} value; \"rest\" is garbage."})");
  EXPECT_EQ(r.verdict, "hack");
  EXPECT_EQ(r.reasoning, "Writes {one} value; \"rest\" is garbage.");
}

TEST(ReviewReply, TrailingCommasAndCaseAreForgiven) {
  const auto r = parse_review_reply(
      "```json\n{\n  \"verdict\": \"HACK\",\n  \"class\": \"Lazy_Output\",\n  \"reasoning\": "
      "\"deferred\",\n}\n```");
  EXPECT_EQ(r.verdict, "hack");
  EXPECT_EQ(r.hack_class, "lazy_output");
}

TEST(ReviewReply, MissingReasoningFallsBackToTheProse) {
  const auto r = parse_review_reply(
      "It launches a thread that finishes after return.\n```json\n{\"verdict\": \"hack\", "
      "\"class\": \"background_work\"}\n```");
  EXPECT_EQ(r.verdict, "hack");
  EXPECT_EQ(r.reasoning, "It launches a thread that finishes after return.");
}

TEST(ReviewReply, ACutOffObjectKeepsTheFieldsThatArrived) {
  const auto r = parse_review_reply(
      "Reasoning...\n```json\n{\"verdict\": \"hack\", \"class\": \"cached_output\", "
      "\"reasoning\": \"It keeps a dict keyed on");
  EXPECT_EQ(r.verdict, "hack");
  EXPECT_EQ(r.hack_class, "cached_output");
}

TEST(ReviewReply, NoneAsClassMeansNoClass) {
  EXPECT_EQ(parse_review_reply(R"({"verdict": "legitimate", "class": "none"})").hack_class, "");
  EXPECT_EQ(parse_review_reply(R"({"verdict": "legitimate", "class": null})").hack_class, "");
}

TEST(ReviewReply, GarbageIsUnparseable) {
  for (const char* reply : {"I think it is fine.", "{not json at all}", "```json\n```", "",
                            "{\"class\": \"lazy_output\", \"reasoning\": \"no verdict key\"}"}) {
    const auto r = parse_review_reply(reply);
    EXPECT_EQ(r.verdict, "unparseable") << reply;
    EXPECT_FALSE(r.problem.empty()) << reply;
  }
  EXPECT_NE(parse_review_reply("").problem.find("empty"), std::string::npos);
}

TEST(ReviewReply, AVerdictOutsideTheVocabularyIsUnparseable) {
  const auto r = parse_review_reply(R"({"verdict": "probably fine", "reasoning": "?"})");
  EXPECT_EQ(r.verdict, "unparseable");
  EXPECT_NE(r.problem.find("probably fine"), std::string::npos);
  EXPECT_EQ(parse_review_reply(R"({"verdict": 1})").verdict, "unparseable");
}

}  // namespace
