// Test helper: a strict JSON parser into a small DOM, so tests can check that the analyzer's output is valid JSON
// (RFC 8259: no trailing commas, escapes, valid UTF-8 passed through) and assert on values by name.
#ifndef CUMEMTRACE_TESTS_UNIT_ANALYZER_JSON_VALUE_H_
#define CUMEMTRACE_TESTS_UNIT_ANALYZER_JSON_VALUE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cumemtrace::analyzer::test {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  // Parses a whole document (surrounding whitespace allowed); nullopt and `*error` on any violation.
  static std::optional<JsonValue> Parse(const std::string& text, std::string* error = nullptr);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool boolean() const { return bool_; }
  // The number's literal text, exactly as written (so 64-bit integers compare exactly).
  const std::string& number_text() const { return text_; }
  double number() const;
  long long integer() const;
  unsigned long long uinteger() const;
  const std::string& str() const { return text_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

  bool has(const std::string& key) const;
  // Member `key` (an empty null value if absent) / element `i`.
  const JsonValue& operator[](const std::string& key) const;
  const JsonValue& operator[](size_t i) const;
  size_t size() const { return type_ == Type::kArray ? array_.size() : members_.size(); }

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

}  // namespace cumemtrace::analyzer::test

#endif  // CUMEMTRACE_TESTS_UNIT_ANALYZER_JSON_VALUE_H_
