// A small streaming JSON writer: objects, arrays, strings, integers, doubles, booleans and null, with commas and
// (optionally) indentation handled for the caller. Strings are escaped per RFC 8259, and bytes that are not valid
// UTF-8 (thread names, argv and symbol names come from the traced process and may hold anything) become U+FFFD,
// so the output is always valid JSON. It must never emit a non-finite number: those become null.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WRITER_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

class JsonWriter {
 public:
  // Appends to `*out`. With `indent` > 0, one member or element per line, nested `indent` spaces deeper.
  explicit JsonWriter(std::string* out, int indent = 0) : out_(out), indent_(indent) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The next member's name; must be followed by exactly one value (or Begin*).
  void Key(absl::string_view key);

  void String(absl::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Double(double value);
  void Bool(bool value);
  void Null();

  // Shorthands for a member: Key(key) then the value.
  void Member(absl::string_view key, absl::string_view value) { Key(key), String(value); }
  void Member(absl::string_view key, const char* value) { Key(key), String(value); }
  void Member(absl::string_view key, const std::string& value) { Key(key), String(value); }
  void Member(absl::string_view key, int64_t value) { Key(key), Int(value); }
  void Member(absl::string_view key, int32_t value) { Key(key), Int(value); }
  void Member(absl::string_view key, uint64_t value) { Key(key), Uint(value); }
  void Member(absl::string_view key, uint32_t value) { Key(key), Uint(value); }
  void Member(absl::string_view key, double value) { Key(key), Double(value); }
  void Member(absl::string_view key, bool value) { Key(key), Bool(value); }

  // The output so far may be moved away (e.g. flushed to a file) between values; the writer keeps its state.
  std::string* out() { return out_; }
  // True when every Begin* has been closed.
  bool complete() const { return stack_.empty() && wrote_top_; }

  // Appends `value` as a JSON string literal (quotes included) to `*out`.
  static void AppendEscaped(absl::string_view value, std::string* out);

 private:
  void BeforeValue();
  void Newline();

  std::string* out_;
  int indent_;
  struct Level {
    bool object;
    bool empty;
  };
  std::vector<Level> stack_;
  bool after_key_ = false;
  bool wrote_top_ = false;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WRITER_H_
