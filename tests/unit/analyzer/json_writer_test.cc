// JsonWriter: structure, commas, indentation, escaping and invalid UTF-8.
#include "analyzer/render/json/json_writer.h"

#include <limits>

#include "gtest/gtest.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer {
namespace {

std::string Escaped(absl::string_view s) {
  std::string out;
  JsonWriter::AppendEscaped(s, &out);
  return out;
}

TEST(JsonWriter, CompactStructure) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Member("a", int64_t{-1});
  w.Key("b");
  w.BeginArray();
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Bool(true);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.EndArray();
  w.Member("c", 0.25);
  w.Member("d", std::numeric_limits<double>::infinity());
  w.Member("e", "x");
  w.EndObject();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(out, R"({"a":-1,"b":[18446744073709551615,true,null,{},[]],"c":0.25,"d":null,"e":"x"})");
}

TEST(JsonWriter, Indented) {
  std::string out;
  JsonWriter w(&out, 2);
  w.BeginObject();
  w.Member("a", int32_t{1});
  w.Key("b");
  w.BeginArray();
  w.Int(2);
  w.EndArray();
  w.Key("c");
  w.BeginObject();
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(out, "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ],\n  \"c\": {}\n}");
  EXPECT_TRUE(test::JsonValue::Parse(out).has_value());
}

TEST(JsonWriter, Escaping) {
  EXPECT_EQ(Escaped("plain"), "\"plain\"");
  EXPECT_EQ(Escaped("q\"b\\s/"), R"("q\"b\\s/")");
  EXPECT_EQ(Escaped("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(Escaped(std::string("\x01\x1f\x00", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(Escaped("\x7f"), "\"\x7f\"");
  EXPECT_EQ(Escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(Escaped("a\xff" "b"), R"("a\ufffdb")");
  EXPECT_EQ(Escaped("\xc3"), R"("\ufffd")");                 // cut-off sequence
  EXPECT_EQ(Escaped("\xc0\xaf"), R"("\ufffd\ufffd")");       // overlong
  EXPECT_EQ(Escaped("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");  // surrogate
  EXPECT_EQ(Escaped("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // > U+10FFFF
  // Every byte string escapes to something a strict parser accepts.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  all += "\xe2\x82";
  std::string error;
  EXPECT_TRUE(test::JsonValue::Parse(Escaped(all), &error).has_value()) << error;
}

}  // namespace
}  // namespace cumemtrace::analyzer
