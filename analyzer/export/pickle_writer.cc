// The pickle writer (see pickle_writer.h). Opcode values are those of CPython's Lib/pickletools.py.
#include "analyzer/export/pickle_writer.h"

#include <limits>

#include "analyzer/render/utf8.h"

namespace cumemtrace::analyzer {
namespace {

constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kSetItems = 'u';
constexpr char kAppends = 'e';
constexpr char kBinUnicode = 'X';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kTuple2 = '\x86';
constexpr char kBinPut = 'q';
constexpr char kLongBinPut = 'r';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';

void AppendLe(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendInt(int64_t v, std::string* out) {
  if (v >= 0 && v < 0x100) {
    out->push_back(kBinInt1);
    AppendLe(static_cast<uint64_t>(v), 1, out);
  } else if (v >= 0 && v < 0x10000) {
    out->push_back(kBinInt2);
    AppendLe(static_cast<uint64_t>(v), 2, out);
  } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
    out->push_back(kBinInt);
    AppendLe(static_cast<uint64_t>(v), 4, out);
  } else {
    // LONG1: the shortest little-endian two's complement form.
    const auto u = static_cast<uint64_t>(v);
    int n = 8;
    while (n > 1) {
      const auto top = static_cast<unsigned char>((u >> (8 * (n - 1))) & 0xff);
      const auto next = static_cast<unsigned char>((u >> (8 * (n - 2))) & 0xff);
      if ((top == 0x00 && (next & 0x80) == 0) || (top == 0xff && (next & 0x80) != 0)) {
        --n;
      } else {
        break;
      }
    }
    out->push_back(kLong1);
    out->push_back(static_cast<char>(n));
    AppendLe(u, n, out);
  }
}

}  // namespace

PickleWriter::PickleWriter(std::string* out) : out_(out) {
  out_->push_back(kProto);
  out_->push_back('\x02');
}

void PickleWriter::BeforeValue() {
  if (stack_.empty()) return;
  Level& top = stack_.back();
  const size_t full = top.dict ? 2 * kBatch : kBatch;
  if (top.pending >= full && top.pending % 2 == 0) Flush(top);
  if (top.pending == 0) out_->push_back(kMark);
}

void PickleWriter::AfterValue() {
  if (!stack_.empty()) ++stack_.back().pending;
}

void PickleWriter::Flush(Level& level) {
  if (level.pending == 0) return;
  out_->push_back(level.dict ? kSetItems : kAppends);
  level.pending = 0;
}

void PickleWriter::BeginDict() {
  BeforeValue();
  out_->push_back(kEmptyDict);
  stack_.push_back(Level{true});
}

void PickleWriter::BeginList() {
  BeforeValue();
  out_->push_back(kEmptyList);
  stack_.push_back(Level{false});
}

void PickleWriter::EndDict() {
  Flush(stack_.back());
  stack_.pop_back();
  AfterValue();
}

void PickleWriter::EndList() { EndDict(); }

void PickleWriter::String(absl::string_view value) {
  BeforeValue();
  const std::string text = ValidUtf8(value);  // BINUNICODE must hold UTF-8
  out_->push_back(kBinUnicode);
  AppendLe(text.size(), 4, out_);
  out_->append(text);
  AfterValue();
}

void PickleWriter::Int(int64_t value) {
  BeforeValue();
  AppendInt(value, out_);
  AfterValue();
}

void PickleWriter::Uint(uint64_t value) {
  if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Int(static_cast<int64_t>(value));
    return;
  }
  BeforeValue();
  out_->push_back(kLong1);
  out_->push_back('\x09');
  AppendLe(value, 8, out_);
  out_->push_back('\0');  // positive
  AfterValue();
}

void PickleWriter::Bool(bool value) {
  BeforeValue();
  out_->push_back(value ? kNewTrue : kNewFalse);
  AfterValue();
}

void PickleWriter::None() {
  BeforeValue();
  out_->push_back(kNone);
  AfterValue();
}

void PickleWriter::IntPair(int64_t a, int64_t b) {
  BeforeValue();
  AppendInt(a, out_);
  AppendInt(b, out_);
  out_->push_back(kTuple2);
  AfterValue();
}

uint32_t PickleWriter::Memoize() {
  const uint32_t id = next_memo_++;
  if (id < 0x100) {
    out_->push_back(kBinPut);
    AppendLe(id, 1, out_);
  } else {
    out_->push_back(kLongBinPut);
    AppendLe(id, 4, out_);
  }
  return id;
}

void PickleWriter::Get(uint32_t id) {
  BeforeValue();
  if (id < 0x100) {
    out_->push_back(kBinGet);
    AppendLe(id, 1, out_);
  } else {
    out_->push_back(kLongBinGet);
    AppendLe(id, 4, out_);
  }
  AfterValue();
}

void PickleWriter::Finish() { out_->push_back(kStop); }

}  // namespace cumemtrace::analyzer
