// Test helper: the strict JSON parser of json_value.h.
#include "tests/unit/analyzer/json_value.h"

#include <cstdlib>

namespace cumemtrace::analyzer::test {

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  bool ParseDocument(JsonValue* out, std::string* error) {
    SkipSpace();
    if (!ParseValue(out, 0)) {
      *error = error_ + " at byte " + std::to_string(pos_);
      return false;
    }
    SkipSpace();
    if (pos_ != s_.size()) {
      *error = "trailing data at byte " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  bool Fail(const std::string& what) {
    error_ = what;
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return Fail("bad literal");
    pos_ += w.size();
    return true;
  }

  bool ParseValue(JsonValue* v, int depth) {
    if (depth > 200) return Fail("too deep");
    if (pos_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->type_ = JsonValue::Type::kString;
      return ParseString(&v->text_);
    }
    if (c == 't') {
      v->type_ = JsonValue::Type::kBool;
      v->bool_ = true;
      return Literal("true");
    }
    if (c == 'f') {
      v->type_ = JsonValue::Type::kBool;
      return Literal("false");
    }
    if (c == 'n') return Literal("null");
    return ParseNumber(v);
  }

  bool ParseNumber(JsonValue* v) {
    const size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) return Fail("bad number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) return Fail("bad fraction");
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) return Fail("bad exponent");
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    v->type_ = JsonValue::Type::kNumber;
    v->text_ = s_.substr(start, pos_ - start);
    return true;
  }

  static void AppendUtf8(unsigned cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool Hex4(unsigned* cp) {
    if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
    *cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      *cp <<= 4;
      if (c >= '0' && c <= '9') {
        *cp |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        *cp |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        *cp |= c - 'A' + 10;
      } else {
        return Fail("bad \\u escape");
      }
    }
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (true) {
      if (pos_ >= s_.size()) return Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return Fail("control character in string");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= s_.size()) return Fail("unterminated escape");
        const char e = s_[pos_++];
        switch (e) {
          case '"': out->push_back('"'); break;
          case '\\': out->push_back('\\'); break;
          case '/': out->push_back('/'); break;
          case 'b': out->push_back('\b'); break;
          case 'f': out->push_back('\f'); break;
          case 'n': out->push_back('\n'); break;
          case 'r': out->push_back('\r'); break;
          case 't': out->push_back('\t'); break;
          case 'u': {
            unsigned cp = 0;
            if (!Hex4(&cp)) return false;
            AppendUtf8(cp, out);
            break;
          }
          default: return Fail("bad escape");
        }
        continue;
      }
      if (c >= 0x80) {
        // Must be valid UTF-8.
        size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || pos_ + n > s_.size()) return Fail("invalid UTF-8");
        for (size_t k = 1; k < n; ++k) {
          if ((static_cast<unsigned char>(s_[pos_ + k]) & 0xC0) != 0x80) return Fail("invalid UTF-8");
        }
        out->append(s_, pos_, n);
        pos_ += n;
        continue;
      }
      out->push_back(static_cast<char>(c));
      ++pos_;
    }
  }

  bool ParseArray(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      v->array_.emplace_back();
      if (!ParseValue(&v->array_.back(), depth + 1)) return false;
      SkipSpace();
      if (pos_ >= s_.size()) return Fail("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected , or ]");
    }
  }

  bool ParseObject(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a key");
      std::string key;
      if (!ParseString(&key)) return false;
      for (const auto& m : v->members_) {
        if (m.first == key) return Fail("duplicate key " + key);
      }
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected :");
      ++pos_;
      SkipSpace();
      v->members_.emplace_back(key, JsonValue());
      if (!ParseValue(&v->members_.back().second, depth + 1)) return false;
      SkipSpace();
      if (pos_ >= s_.size()) return Fail("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected , or }");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

std::optional<JsonValue> JsonValue::Parse(const std::string& text, std::string* error) {
  JsonValue v;
  std::string local;
  JsonParser parser(text);
  if (!parser.ParseDocument(&v, error != nullptr ? error : &local)) return std::nullopt;
  return v;
}

double JsonValue::number() const { return std::strtod(text_.c_str(), nullptr); }
long long JsonValue::integer() const { return std::strtoll(text_.c_str(), nullptr, 10); }
unsigned long long JsonValue::uinteger() const { return std::strtoull(text_.c_str(), nullptr, 10); }

bool JsonValue::has(const std::string& key) const {
  for (const auto& m : members_) {
    if (m.first == key) return true;
  }
  return false;
}

const JsonValue& JsonValue::operator[](const std::string& key) const {
  static const JsonValue* const kNull = new JsonValue();
  for (const auto& m : members_) {
    if (m.first == key) return m.second;
  }
  return *kNull;
}

const JsonValue& JsonValue::operator[](size_t i) const {
  static const JsonValue* const kNull = new JsonValue();
  return i < array_.size() ? array_[i] : *kNull;
}

}  // namespace cumemtrace::analyzer::test
