#include "cudal1/report/html_text.hpp"

#include <gtest/gtest.h>

#include "page_assets.hpp"

namespace cudal1::report {
namespace {

TEST(EscapeHtml, EscapesMarkupCharacters) {
  EXPECT_EQ(escape_html("a < b && c > \"d\" 'e'"),
            "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &#39;e&#39;");
}

TEST(EscapeHtml, ScriptEndAndCommentBecomeText) {
  const std::string out = escape_html("x</script><script>alert(1)</script><!-- y");
  EXPECT_EQ(out.find('<'), std::string::npos);
  EXPECT_EQ(out, "x&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!-- y");
}

TEST(EscapeHtml, ErrorTextWithHtmlIsShownNotParsed) {
  const std::string error = "expected 1.0 <b>got</b> <img src=x onerror=\"alert('x')\">";
  const std::string out = escape_html(error);
  EXPECT_EQ(out.find("<img"), std::string::npos);
  EXPECT_NE(out.find("&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;"),
            std::string::npos);
}

TEST(EscapeHtml, InvalidUtf8AndNulAreReplaced) {
  EXPECT_EQ(escape_html(std::string("a\xff"
                                    "b",
                                    3)),
            "a?b");
  EXPECT_EQ(escape_html(std::string("a\0b", 3)), "a&#xFFFD;b");
  EXPECT_EQ(escape_html("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(JsonForScript, CannotCloseTheScriptElement) {
  const nlohmann::json value = {{"code", "</script><script>alert(1)</script>"},
                                {"comment", "<!-- <script>"},
                                {"amp", "a & b"}};
  const std::string out = json_for_script(value);
  EXPECT_EQ(out.find('<'), std::string::npos);
  EXPECT_EQ(out.find('>'), std::string::npos);
  EXPECT_EQ(out.find('&'), std::string::npos);
  EXPECT_NE(out.find("\\u003c/script\\u003e"), std::string::npos);
  // The JSON still means the same.
  EXPECT_EQ(nlohmann::json::parse(out), value);
}

TEST(JsonForScript, LineSeparatorsAndInvalidUtf8) {
  const nlohmann::json value = {{"text",
                                 "a\xe2\x80\xa8"
                                 "b\xe2\x80\xa9"
                                 "c"}};
  const std::string out = json_for_script(value);
  EXPECT_NE(out.find("\\u2028"), std::string::npos);
  EXPECT_NE(out.find("\\u2029"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(out), value);
  const std::string bad = json_for_script({{"text", std::string("x\xff", 2)}});
  EXPECT_EQ(nlohmann::json::parse(bad)["text"], "x\xef\xbf\xbd");
}

TEST(CanInline, RefusesWhatWouldEndOrConfuseTheElement) {
  EXPECT_TRUE(can_inline("var a = 1 < 2; // fine", RawText::kScript));
  EXPECT_FALSE(can_inline("s = '</script>'", RawText::kScript));
  EXPECT_FALSE(can_inline("s = '</SCRIPT '", RawText::kScript));
  EXPECT_FALSE(can_inline("x <!-- y", RawText::kScript));
  // highlight.js mentions </style> in a string: harmless inside a script.
  EXPECT_TRUE(can_inline("s = '</style>'", RawText::kScript));
  EXPECT_FALSE(can_inline("a { } </style>", RawText::kStyle));
  EXPECT_TRUE(can_inline("a { content: '<!--'; }", RawText::kStyle));
}

TEST(CanInline, OurOwnAssetsAreSafe) {
  EXPECT_TRUE(can_inline(page_assets::kErrorHook, RawText::kScript));
  EXPECT_TRUE(can_inline(page_assets::kReportScript, RawText::kScript));
  EXPECT_TRUE(can_inline(page_assets::kReportStyle, RawText::kStyle));
}

TEST(CspScriptHash, MatchesTheKnownDigest) {
  // printf 'alert(1)' | openssl dgst -sha256 -binary | base64
  EXPECT_EQ(csp_script_hash("alert(1)"), "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='");
  EXPECT_EQ(csp_script_hash(""), "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
}

TEST(HtmlId, KeepsOnlySafeCharacters) {
  EXPECT_EQ(html_id("task-l1-3_Gelu Tanh\"><x"), "task-l1-3_Gelu-Tanh---x");
}

}  // namespace
}  // namespace cudal1::report
