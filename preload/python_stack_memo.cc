#include "preload/python_stack_memo.h"

#include "preload/python_frame_table.h"

namespace cumemtrace::preload {

void PythonStackMemo::Intern(uint32_t thread, const RawPythonStack& stack, PythonFrameTable* table,
                             StringTable* strings, uint64_t* ids) {
  const int n = stack.count;
  if (slots_.size() == 0 && !slots_.Resize(kSlots)) {  // out of memory: every frame through the table
    for (int i = 0; i < n; ++i) ids[i] = table->Intern(stack.frames[i], strings);
    return;
  }
  Slot& slot = slots_[thread % kSlots];
  if (slot.thread != thread) {
    slot.thread = thread;
    slot.count = 0;
  }
  // Entry k of the slot is frame n - 1 - k of the stack.
  int same = 0;
  const int limit = n < slot.count ? n : slot.count;
  for (; same < limit; ++same) {
    const RawPythonFrame& frame = stack.frames[n - 1 - same];
    const Entry& e = slot.entries[same];
    if (e.code != frame.code || e.instr != frame.instr || !SameIdentity(e.identity, IdentifyPythonCode(frame.code))) {
      break;
    }
    ids[n - 1 - same] = e.id;
  }
  for (int k = same; k < n; ++k) {
    const RawPythonFrame& frame = stack.frames[n - 1 - k];
    const uint64_t id = table->Intern(frame, strings);
    ids[n - 1 - k] = id;
    slot.entries[k] = Entry{frame.code, frame.instr, IdentifyPythonCode(frame.code), id};
  }
  slot.count = n;
}

void PythonStackMemo::Reset() { slots_.Release(); }

}  // namespace cumemtrace::preload
