// ValidUtf8: what the pprof export's string table holds (proto3 `string`) for names and paths that are bytes.
#include "analyzer/render/utf8.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(ValidUtf8, KeepsValidText) {
  EXPECT_EQ(ValidUtf8(""), "");
  EXPECT_EQ(ValidUtf8("/usr/lib/libcuda.so.1"), "/usr/lib/libcuda.so.1");
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(ValidUtf8, ReplacesEachBadByte) {
  // The module path tests/fuzz found (regressions/pprof_module_path_not_utf8.pb): 0xD0 then '`'.
  EXPECT_EQ(ValidUtf8(std::string("x86_64-lintG\x05\x00\xd0`\x00\x00ibc.so.6", 22)),
            std::string("x86_64-lintG\x05\x00\xEF\xBF\xBD`\x00\x00ibc.so.6", 24));
  EXPECT_EQ(ValidUtf8("caf\xE9"), "caf\xEF\xBF\xBD");                           // Latin-1
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                // overlong
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");                // cut inside a character
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
}

}  // namespace
}  // namespace cumemtrace::analyzer
