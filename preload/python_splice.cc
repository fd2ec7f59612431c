#include "preload/python_splice.h"

namespace cumemtrace::preload {

int SplicePythonFrames(const SpliceInput& in, uint64_t* out, int max_out, bool* matched) {
  int eval_count = 0;
  for (int i = 0; i < in.native_count; ++i) eval_count += in.is_eval[i] ? 1 : 0;
  *matched = eval_count == in.group_count;
  int n = 0;
  auto put = [&](uint64_t pc) {
    if (n < max_out) out[n++] = pc;
  };
  auto put_groups = [&](int first, int last) {  // groups [first, last), innermost first
    const int begin = first == 0 ? 0 : in.group_end[first - 1];
    const int end = last == 0 ? 0 : in.group_end[last - 1];
    for (int i = begin; i < end; ++i) put(in.python[i]);
    return end > begin;
  };
  int eval_seen = 0;
  for (int i = 0; i < in.native_count; ++i) {
    if (!in.is_eval[i] || eval_seen >= in.group_count) {
      put(in.native[i]);
      continue;
    }
    const bool last_eval = eval_seen == eval_count - 1;
    const int first = eval_seen;
    const int last = last_eval ? in.group_count : eval_seen + 1;
    ++eval_seen;
    // A group that ran no readable frame keeps the native frame, so the stack still shows the interpreter there.
    if (!put_groups(first, last)) put(in.native[i]);
  }
  if (eval_count == 0) put_groups(0, in.group_count);
  return n;
}

}  // namespace cumemtrace::preload
