// printable_text: what reaches a terminal from a file's strings.
#include "base/utf8.h"

#include <gtest/gtest.h>

namespace minfer {
namespace {

TEST(PrintableText, PlainTextAndOtherScriptsPassThrough) {
  EXPECT_EQ(printable_text("qwen2: blk.0.attn_q.weight"), "qwen2: blk.0.attn_q.weight");
  EXPECT_EQ(printable_text("two\nlines"), "two\nlines");
  EXPECT_EQ(printable_text("\xe6\xa8\xa1\xe5\x9e\x8b \xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82"),
            "\xe6\xa8\xa1\xe5\x9e\x8b \xc3\xa9t\xc3\xa9 \xf0\x9f\x99\x82");
}

TEST(PrintableText, ControlsAreEscaped) {
  EXPECT_EQ(printable_text("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
  EXPECT_EQ(printable_text("a\rb\tc\x7f"), "a\\x0db\\x09c\\x7f");
  EXPECT_EQ(printable_text(std::string("nul\0x", 5)), "nul\\x00x");
}

TEST(PrintableText, C1ControlsSeparatorsAndBidiOverridesAreEscaped) {
  EXPECT_EQ(printable_text("\xc2\x9b"
                           "31m"),
            "\\u{009b}31m");  // 8-bit CSI as UTF-8
  EXPECT_EQ(printable_text("a\xe2\x80\xa8"
                           "b"),
            "a\\u{2028}b");
  EXPECT_EQ(printable_text("\xe2\x80\xae"
                           "cod"),
            "\\u{202e}cod");
  EXPECT_EQ(printable_text("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u{2066}x\\u{2069}");
}

TEST(PrintableText, IllFormedBytesAreEscapedOneByOne) {
  EXPECT_EQ(printable_text("\x9b"
                           "31m"),
            "\\x9b31m");
  EXPECT_EQ(printable_text("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable_text("ab\xe6\xa8"), "ab\\xe6\\xa8");       // truncated sequence
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

}  // namespace
}  // namespace minfer
