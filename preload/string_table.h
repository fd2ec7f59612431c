// The trace's interned strings, shared by everything in the preload that writes string ids (Python frame names and
// files while the process runs, symbol names at exit), so that ids never clash. Not thread-safe: the recorder calls
// it under its lock. Id i (1-based) is the NUL-terminated string at offsets_[i - 1] of chars_; 0 = out of memory
// (and, in the trace, the empty string).
#ifndef CUMEMTRACE_PRELOAD_STRING_TABLE_H_
#define CUMEMTRACE_PRELOAD_STRING_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/byte_buffer.h"
#include "preload/mapped_array.h"

namespace cumemtrace::preload {

class StringTable {
 public:
  // The id of `text` (`size` bytes, no NUL inside), interning it if new.
  uint32_t Intern(const char* text, size_t size);
  uint32_t Intern(const char* text);
  const char* Get(uint32_t id) const { return &chars_[offsets_[id - 1]]; }
  size_t size() const { return offsets_.size(); }

  // Writes Strings packets for the strings interned since the last call. False if the buffer could not grow (they
  // stay pending).
  bool WritePending(ByteBuffer* out);

  // Drops everything (a forked child that starts a new trace).
  void Reset();

 private:
  bool Rehash();
  uint64_t Hash(const char* text, size_t size) const;

  MappedArray<char> chars_;
  MappedArray<size_t> offsets_;
  MappedArray<uint32_t> index_;
  size_t first_pending_ = 1;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_STRING_TABLE_H_
