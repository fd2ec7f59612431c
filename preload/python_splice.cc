#include "preload/python_splice.h"

#include <string.h>

namespace cumemtrace::preload {

int SplicePythonFrames(const SpliceInput& in, uint64_t* out, int max_out, bool* matched) {
  int eval_count = 0;
  for (int i = 0; i < in.native_count; ++i) eval_count += in.is_eval[i] ? 1 : 0;
  *matched = eval_count == in.group_count;
  int n = 0;
  // Frames go out in runs, each copied whole while room is left: a stack is mostly such runs (the native frames
  // between two eval calls, the Python frames of one group), and this runs on every allocation from Python.
  auto put = [&](const uint64_t* frames, int count) {
    if (count > max_out - n) count = max_out - n;
    if (count <= 0) return;
    memcpy(out + n, frames, sizeof(uint64_t) * static_cast<size_t>(count));
    n += count;
  };
  static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "native frames are copied as 64-bit words");
  const auto* native = reinterpret_cast<const uint64_t*>(in.native);
  auto put_groups = [&](int first, int last) {  // groups [first, last), innermost first
    const int begin = first == 0 ? 0 : in.group_end[first - 1];
    const int end = last == 0 ? 0 : in.group_end[last - 1];
    put(in.python + begin, end - begin);
    return end > begin;
  };
  int eval_seen = 0;
  int native_from = 0;  // native frames [native_from, i) are still to be put
  for (int i = 0; i < in.native_count; ++i) {
    if (!in.is_eval[i] || eval_seen >= in.group_count) continue;
    put(native + native_from, i - native_from);
    native_from = i + 1;
    const bool last_eval = eval_seen == eval_count - 1;
    const int first = eval_seen;
    const int last = last_eval ? in.group_count : eval_seen + 1;
    ++eval_seen;
    // A group that ran no readable frame keeps the native frame, so the stack still shows the interpreter there.
    if (!put_groups(first, last)) put(native + i, 1);
  }
  put(native + native_from, in.native_count - native_from);
  if (eval_count == 0) put_groups(0, in.group_count);
  return n;
}

}  // namespace cumemtrace::preload
