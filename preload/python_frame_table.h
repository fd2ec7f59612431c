// Interns Python frames for the trace: each distinct (function, file, line) gets one PythonFrames id, written before
// the first stack node that names it. Two caches keep the hot path to one lookup per frame: code object -> names
// (checked against the object's identity, since CPython reuses the address of a freed code object) and (code
// object, instruction) -> frame id. Not thread-safe: the recorder calls it under its lock.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_
#define CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/byte_buffer.h"
#include "preload/mapped_array.h"
#include "preload/python_frames.h"
#include "preload/string_table.h"

namespace cumemtrace::preload {

class PythonFrameTable {
 public:
  // The frame id (>= 1) of `frame`, 0 when memory ran out. New names go into `strings`.
  uint64_t Intern(const RawPythonFrame& frame, StringTable* strings);

  // Writes the PythonFrames interned since the last call (their strings must have been written before).
  bool WritePending(ByteBuffer* out);
  bool HasPending() const { return first_pending_ <= frames_.size(); }

  void Reset();

 private:
  struct Code {  // one slot of the code cache
    uintptr_t code;
    PythonCodeIdentity identity;
    uint32_t function;
    uint32_t file;
    uint32_t generation;  // bumped when the slot is reused for another object at the same address
  };
  struct Frame {
    uint32_t function;
    uint32_t file;
    uint32_t line;
  };
  struct Slot {  // open addressing for both lookups: (a, b) -> id, id 0 = empty
    uint64_t a;
    uint64_t b;
    uint64_t id;
  };

  const Code* FindCode(uintptr_t code, StringTable* strings);
  static bool Insert(MappedArray<Slot>& table, size_t* used, uint64_t a, uint64_t b, uint64_t id);
  static uint64_t Find(const MappedArray<Slot>& table, uint64_t a, uint64_t b);

  MappedArray<Code> codes_;             // direct-mapped cache by address hash (a miss only costs a re-read)
  MappedArray<Frame> frames_;           // id - 1
  MappedArray<Slot> frame_index_;       // (function << 32 | file, line) -> id
  size_t frame_index_used_ = 0;
  MappedArray<Slot> instr_index_;       // (code, generation << 32 | instr) -> id
  size_t instr_index_used_ = 0;
  uint32_t next_generation_ = 1;
  size_t first_pending_ = 1;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_
