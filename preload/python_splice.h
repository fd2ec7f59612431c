// Puts Python frames into a native stack where the interpreter ran them: the k-th native frame (innermost first)
// inside the eval loop is replaced by the Python frames of the k-th eval call. Pure function, tested on its own.
//
// When the counts disagree (a truncated native stack, a cold part of the eval loop the symbol table does not
// cover), the innermost eval frames still get their own groups and the outermost eval frame found takes all
// remaining groups, so the frames nearest the CUDA call stay right. With no eval frame at all, the Python frames go
// after (outside) the native ones.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_SPLICE_H_
#define CUMEMTRACE_PRELOAD_PYTHON_SPLICE_H_

#include <stdint.h>

namespace cumemtrace::preload {

struct SpliceInput {
  const uintptr_t* native;     // innermost first
  const bool* is_eval;         // per native frame: inside the eval loop
  int native_count;
  const uint64_t* python;      // Python frame pcs (format::PcOfPythonFrameId), innermost first
  const uint16_t* group_end;   // group g = python[g ? group_end[g-1] : 0, group_end[g])
  int group_count;
};

// Writes the merged stack to `out` (innermost first, at most `max_out` frames, the outermost cut) and returns its
// length. Sets *matched when the eval frames and the groups paired one to one.
int SplicePythonFrames(const SpliceInput& in, uint64_t* out, int max_out, bool* matched);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_SPLICE_H_
