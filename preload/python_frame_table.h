// Interns Python frames for the trace: each distinct (function, file, line) gets one PythonFrames id, written before
// the first stack node that names it. Two caches keep the hot path to one lookup per frame: code object -> names
// (a direct-mapped cache, checked against the object's identity, since CPython reuses the address of a freed code
// object) and (code object, identity, instruction) -> frame id. Not thread-safe: the recorder calls it under its
// lock.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_
#define CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/byte_buffer.h"
#include "preload/mapped_array.h"
#include "preload/pair_index.h"
#include "preload/python_frames.h"
#include "preload/python_stack_memo.h"
#include "preload/string_table.h"

namespace cumemtrace::preload {

class PythonFrameTable {
 public:
  // The frame id (>= 1) of `frame`, 0 when memory ran out. New names go into `strings`.
  uint64_t Intern(const RawPythonFrame& frame, StringTable* strings);

  // The ids of every frame of `stack`, a stack of thread `thread` (ids[i] for stack.frames[i], 0 where memory ran
  // out): the frames it shares with that thread's previous stack cost a comparison (python_stack_memo.h).
  void InternStack(uint32_t thread, const RawPythonStack& stack, StringTable* strings, uint64_t* ids) {
    memo_.Intern(thread, stack, this, strings, ids);
  }

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
    uint64_t identity_hash;  // of `identity`
  };
  struct Frame {
    uint32_t function;
    uint32_t file;
    uint32_t line;
  };

  const Code* FindCode(uintptr_t code, StringTable* strings);

  MappedArray<Code> codes_;             // direct-mapped cache by address hash (a miss only costs a re-read)
  MappedArray<Frame> frames_;           // id - 1
  PairIndex frame_index_;               // (function << 32 | file, line) -> id
  PairIndex instr_index_;               // (code, hash of identity and instr) -> id
  size_t first_pending_ = 1;
  PythonStackMemo memo_;  // remembers ids of this table: reset with it
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_FRAME_TABLE_H_
