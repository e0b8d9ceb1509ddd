#include "cudal1/common/template.hpp"

#include <gtest/gtest.h>

namespace cudal1 {
namespace {

TEST(Template, SubstitutesValues) {
  const nlohmann::json ctx = {{"name", "relu"}, {"speedup", 1.5}, {"ok", true}};
  EXPECT_EQ(render_template("task {{name}} at {{ speedup }}x {{ok}} {{missing}}.", ctx),
            "task relu at 1.5x true .");
}

TEST(Template, RepeatsSectionsOverArraysWithOuterNamesVisible) {
  const nlohmann::json ctx = {{"task", "t"}, {"items", {{{"code", "a"}}, {{"code", "b"}}}}};
  EXPECT_EQ(render_template("{{#items}}[{{code}}/{{task}}]{{/items}}", ctx), "[a/t][b/t]");
}

TEST(Template, ConditionalAndInvertedSections) {
  const nlohmann::json ctx = {{"yes", true}, {"no", false}, {"empty", nlohmann::json::array()}};
  EXPECT_EQ(render_template("{{#yes}}Y{{/yes}}{{#no}}N{{/no}}{{^no}}!N{{/no}}{{^empty}}E{{/"
                            "empty}}{{^absent}}A{{/absent}}",
                            ctx),
            "Y!NEA");
}

TEST(Template, StandaloneSectionLinesLeaveNoBlankLines) {
  const nlohmann::json ctx = {{"items", {1, 2}}};
  EXPECT_EQ(render_template("head\n{{#items}}\nx\n{{/items}}\ntail\n", ctx), "head\nx\nx\ntail\n");
}

TEST(Template, NestedSectionsOfTheSameName) {
  const nlohmann::json ctx = {{"a", {{{"a", {1}}}}}};
  EXPECT_EQ(render_template("{{#a}}<{{#a}}i{{/a}}>{{/a}}", ctx), "<i>");
}

TEST(Template, CommentsAreDropped) {
  EXPECT_EQ(render_template("a{{! note }}b", {}), "ab");
}

TEST(Template, ValuesAreNotReinterpreted) {
  const nlohmann::json ctx = {{"code", "int x[] = {{1}};"}};
  EXPECT_EQ(render_template("{{code}}", ctx), "int x[] = {{1}};");
}

TEST(Template, BrokenTemplatesNameTheLine) {
  try {
    render_template("ok\n{{#open}}\nnever closed\n", {});
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(render_template("{{/stray}}", {}), TemplateError);
  EXPECT_THROW(render_template("{{unterminated", {}), TemplateError);
}

}  // namespace
}  // namespace cudal1
