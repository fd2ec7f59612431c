// Each thread's previous Python stack with the frame ids it was given, so that the next stack of the same thread
// looks up only the frames that changed. Consecutive allocations of a thread share their outer frames (the training
// loop, the model's forward, the module calls): in a PyTorch step most of a stack's Python frames are those of the
// stack before it, and a frame id lookup (code cache, identity check, instruction index) costs about ten times the
// comparison that replaces it here.
//
// A frame takes a remembered id only when its code object, instruction and code identity (the same check the code
// cache makes: CPython reuses a freed code object's address) equal those remembered at the same depth counted from
// the outermost frame; the id then is the one the table would give. Threads share a few slots by thread index, so
// memory stays bounded; two threads in one slot just miss more. Not thread-safe: the recorder calls it under its
// lock, as it does the table.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_STACK_MEMO_H_
#define CUMEMTRACE_PRELOAD_PYTHON_STACK_MEMO_H_

#include <stdint.h>

#include "preload/mapped_array.h"
#include "preload/python_frames.h"

namespace cumemtrace::preload {

class PythonFrameTable;
class StringTable;

class PythonStackMemo {
 public:
  // Writes the id of each frame of `stack` (innermost first, 0 where interning failed) to ids[0, stack.count).
  void Intern(uint32_t thread, const RawPythonStack& stack, PythonFrameTable* table, StringTable* strings,
              uint64_t* ids);

  // Forgets every stack (the table's ids were reset).
  void Reset();

 private:
  static constexpr uint32_t kSlots = 16;
  struct Entry {
    uintptr_t code;
    int32_t instr;
    PythonCodeIdentity identity;
    uint64_t id;
  };
  struct Slot {
    uint32_t thread;  // the thread whose stack this is (0: none yet)
    int count;
    Entry entries[kMaxPythonFrames];  // outermost first
  };

  MappedArray<Slot> slots_;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_STACK_MEMO_H_
