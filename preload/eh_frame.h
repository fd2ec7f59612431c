// How to step from a frame to its caller on x86-64, read from a loaded module's .eh_frame (the call frame
// information every compiler emits for C++ exceptions): the "standard" frames only, whose canonical frame address
// (CFA) is RSP or RBP plus a constant, whose return address is at CFA - 8 and whose caller's RBP is unchanged or
// saved at a constant offset from the CFA. That is nearly every frame of a compiled program; everything else
// (DWARF expressions, signal frames, stack realignment through another register) is reported as unsupported and
// the caller falls back to libunwind.
//
// Reads only the module's mapped memory, every read checked against the bounds the caller gives: malformed or
// unexpected call frame information is unsupported, never a crash.
#ifndef CUMEMTRACE_PRELOAD_EH_FRAME_H_
#define CUMEMTRACE_PRELOAD_EH_FRAME_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

// The rule that unwinds one frame, given its registers (RSP, RBP) at the instruction.
struct FrameRule {
  enum Kind : uint8_t {
    kUnsupported = 0,  // libunwind must do it
    kStep = 1,         // CFA = (cfa_from_rbp ? RBP : RSP) + cfa_offset; return address at CFA - 8
    kOutermost = 2,    // the return address is undefined: the stack ends here (thread start, _start)
  };
  Kind kind = kUnsupported;
  bool cfa_from_rbp = false;
  bool rbp_saved = false;  // the caller's RBP is at CFA + rbp_offset (else RBP is unchanged)
  int32_t cfa_offset = 0;
  int32_t rbp_offset = 0;
};

// A loaded module's unwind tables: its .eh_frame_hdr (PT_GNU_EH_FRAME) and the readable range holding them.
struct EhFrameModule {
  const uint8_t* hdr = nullptr;  // .eh_frame_hdr
  size_t hdr_size = 0;
  uintptr_t readable_start = 0;  // the mapped segment(s) where .eh_frame lies: no read goes outside
  uintptr_t readable_end = 0;
};

// The rule for the instruction at `pc` (for a return address: the call instruction, return address - 1).
FrameRule FindFrameRule(const EhFrameModule& module, uintptr_t pc);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_EH_FRAME_H_
