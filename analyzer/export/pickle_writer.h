// A small streaming writer of Python pickles (protocol 2 header), for files that Python tools and PyTorch's
// memory_viz load (`cumem-analyze torch-snapshot`). It writes only what such a file needs: dicts, lists, 2-tuples,
// str, int, bool and None, plus the memo (BINPUT/BINGET) so that an object written once (a stack's frame list) is
// shared wherever it appears again. The opcodes are the ones both CPython's unpickler and memory_viz's own
// JavaScript unpickler read: EMPTY_DICT/EMPTY_LIST + MARK + SETITEMS/APPENDS in batches of at most 1000 items (as
// CPython's pickler does; a browser cannot spread an unbounded list), BINUNICODE, BININT1/BININT2/BININT/LONG1,
// NEWTRUE/NEWFALSE, NONE, TUPLE2, BINPUT/LONG_BINPUT, BINGET/LONG_BINGET. Bytes that are not valid UTF-8 become
// U+FFFD, so every string loads.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_PICKLE_WRITER_H_
#define CUMEMTRACE_ANALYZER_EXPORT_PICKLE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

class PickleWriter {
 public:
  // Appends to `*out`; writes the PROTO 2 header at once.
  explicit PickleWriter(std::string* out);

  // A dict's items are written as Key(k) then one value, in order; a list's as values.
  void BeginDict();
  void EndDict();
  void BeginList();
  void EndList();
  void Key(absl::string_view key) { String(key); }

  void String(absl::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Bool(bool value);
  void None();
  // (a, b) as a tuple.
  void IntPair(int64_t a, int64_t b);

  // Remembers the value just completed (a string, or a dict or list after its End*) and returns its memo id.
  uint32_t Memoize();
  // Writes the value remembered as `id` again (the same object once loaded).
  void Get(uint32_t id);

  // Writes STOP. The pickle is complete when every Begin* has been closed and exactly one top value written.
  void Finish();

  static constexpr size_t kBatch = 1000;

 private:
  struct Level {
    bool dict;
    size_t pending = 0;  // values on the stack since the open MARK (0: no MARK open)
  };
  // Called before each value (and key): opens a MARK in the enclosing container when its batch is empty.
  void BeforeValue();
  // Called after each complete value: flushes a full batch.
  void AfterValue();
  void Flush(Level& level);

  std::string* out_;
  std::vector<Level> stack_;
  uint32_t next_memo_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_PICKLE_WRITER_H_
