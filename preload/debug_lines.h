// File and line for program counters from a module's DWARF debug info: in the module's own file, or in a separate
// debug file found by build id under /usr/lib/debug/.build-id. It exists so that a trace written at a clean exit
// says "train.cc:42", not only "Train()+0x1c", when the program was built with -g or its debug package is installed.
//
// libdw is loaded with dlopen ("libelf.so.1", then "libdw.so.1"; the preload's RUNPATH $ORIGIN finds copies bundled
// beside it) only when first needed, at exit: the preload keeps no DT_NEEDED entry on it and runs without it (then
// traces carry names only, and nothing is said). It must never run on the event path: libdw allocates with malloc.
// It never asks the network for debug info (its own debug-file lookup replaces libdw's, which may use debuginfod).
#ifndef CUMEMTRACE_PRELOAD_DEBUG_LINES_H_
#define CUMEMTRACE_PRELOAD_DEBUG_LINES_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

struct ModuleEntry;

// A module whose debug info is larger than this is skipped: indexing it could take longer than the whole budget.
inline constexpr uint64_t kMaxDebugFileBytes = 2ull << 30;

class DebugLines {
 public:
  enum class Open { kOk, kNoDebugInfo, kTooBig };

  // Loads libdw once; false (silently) when it cannot be loaded.
  bool Load();

  // Opens `module`'s debug info (closing the one open before).
  Open OpenModule(const ModuleEntry& module);

  // Source file (owned by libdw, valid until the module is closed) and line of runtime address `address` in the
  // open module; the innermost location when code was inlined. nullptr when the debug info does not cover it.
  const char* Lookup(uint64_t address, uint32_t* line);

  void CloseModule();

 private:
  void* dwfl_ = nullptr;    // Dwfl*
  void* module_ = nullptr;  // Dwfl_Module*
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_DEBUG_LINES_H_
