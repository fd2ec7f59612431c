// The JSON writer (see json_writer.h). Must never emit invalid JSON, whatever bytes a string holds.
#include "analyzer/render/json/json_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/render/utf8.h"

namespace cumemtrace::analyzer {
void JsonWriter::AppendEscaped(absl::string_view value, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < value.size()) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      // Copy the run of plain ASCII at once.
      size_t j = i + 1;
      while (j < value.size()) {
        const unsigned char d = static_cast<unsigned char>(value[j]);
        if (d < 0x20 || d >= 0x80 || d == '"' || d == '\\') break;
        ++j;
      }
      out->append(value.data() + i, j - i);
      i = j;
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); ++i; continue;
      case '\\': out->append("\\\\"); ++i; continue;
      case '\b': out->append("\\b"); ++i; continue;
      case '\f': out->append("\\f"); ++i; continue;
      case '\n': out->append("\\n"); ++i; continue;
      case '\r': out->append("\\r"); ++i; continue;
      case '\t': out->append("\\t"); ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      absl::StrAppendFormat(out, "\\u%04x", c);
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(value, i);
    if (n == 0) {
      out->append("\\ufffd");
      ++i;
    } else {
      out->append(value.data() + i, n);
      i += n;
    }
  }
  out->push_back('"');
}

void JsonWriter::Newline() {
  if (indent_ <= 0) return;
  out_->push_back('\n');
  out_->append(stack_.size() * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) {
    wrote_top_ = true;
    return;
  }
  Level& level = stack_.back();
  if (!level.empty) out_->push_back(',');
  level.empty = false;
  Newline();
}

void JsonWriter::Key(absl::string_view key) {
  Level& level = stack_.back();
  if (!level.empty) out_->push_back(',');
  level.empty = false;
  Newline();
  AppendEscaped(key, out_);
  out_->append(indent_ > 0 ? ": " : ":");
  after_key_ = true;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_->push_back('{');
  stack_.push_back(Level{true, true});
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_->push_back('[');
  stack_.push_back(Level{false, true});
}

void JsonWriter::EndObject() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Newline();
  out_->push_back('}');
}

void JsonWriter::EndArray() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Newline();
  out_->push_back(']');
}

void JsonWriter::String(absl::string_view value) {
  BeforeValue();
  AppendEscaped(value, out_);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(out_, value);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_->append("null");
    return;
  }
  absl::StrAppendFormat(out_, "%.6g", value);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_->append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
}

}  // namespace cumemtrace::analyzer
