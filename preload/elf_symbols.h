// Function names for program counters, read from a module's own ELF symbol table (.symtab, else .dynsym) at the
// end of tracing, so the trace is readable without the binaries. Runs only at a clean exit, never in a hook. Names
// are written raw (mangled); the analyzer demangles. File and line from debug info come later (issue: Python
// stacks and portable traces).
#ifndef CUMEMTRACE_PRELOAD_ELF_SYMBOLS_H_
#define CUMEMTRACE_PRELOAD_ELF_SYMBOLS_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/mapped_array.h"

namespace cumemtrace::preload {

class ElfSymbols {
 public:
  // Maps `path` and indexes its function symbols. Returns false if the file cannot be read as ELF64.
  bool Load(const char* path);
  void Release();

  // The function containing file address `address` (pc - load bias): its name (NUL-terminated, inside the mapped
  // file) and the offset of `address` from its start. Returns nullptr if no symbol covers it.
  const char* Lookup(uint64_t address, uint64_t* offset) const;

 private:
  struct Symbol {
    uint64_t start;
    uint64_t size;
    const char* name;
  };

  void* map_ = nullptr;
  size_t map_size_ = 0;
  MappedArray<Symbol> symbols_;  // sorted by start
};

// Every named symbol of the ELF64 file at `path` (functions and objects, from .symtab when it has one, else
// .dynsym): `visit(name, file_address, size, context)`. Returns kNoFile when the file cannot be read as ELF64,
// kNoSymtab when it has only .dynsym (stripped: the symbols that only .symtab has are missing), kOk otherwise.
// Maps and unmaps the file; no allocation from the heap.
enum class ElfScan { kNoFile, kNoSymtab, kOk };
ElfScan ForEachElfSymbol(const char* path, void (*visit)(const char* name, uint64_t address, uint64_t size,
                                                         void* context),
                         void* context);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_ELF_SYMBOLS_H_
