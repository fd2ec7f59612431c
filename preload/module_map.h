// The loaded modules (executable and shared objects) of the traced process: path, load bias, address range and
// GNU build id, read with dl_iterate_phdr. Stack pcs are raw addresses; this map is what makes them meaningful on
// another machine. Rescanned when a library may have been loaded (dlopen hook, flush thread, exit). Not
// thread-safe: the recorder serialises Scan() with its own module lock, outside its main lock (dl_iterate_phdr
// takes the loader's lock).
#ifndef CUMEMTRACE_PRELOAD_MODULE_MAP_H_
#define CUMEMTRACE_PRELOAD_MODULE_MAP_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/mapped_array.h"

namespace cumemtrace::preload {

inline constexpr size_t kMaxBuildIdBytes = 32;
inline constexpr size_t kModulePathBytes = 512;

struct ModuleEntry {
  uint32_t id;  // 1-based, stable for the trace
  uint64_t load_bias;
  uint64_t start;
  uint64_t end;
  uint8_t build_id[kMaxBuildIdBytes];
  uint32_t build_id_size;
  bool written;  // its Module packet has been written
  char path[kModulePathBytes];
};

class ModuleMap {
 public:
  // Adds modules loaded since the last scan. Returns how many were added.
  size_t Scan();

  size_t size() const { return modules_.size(); }
  ModuleEntry& at(size_t i) { return modules_[i]; }

  // The module whose range holds `pc`, or nullptr.
  const ModuleEntry* Find(uint64_t pc) const;

  void Reset() { modules_.Release(); }

 private:
  MappedArray<ModuleEntry> modules_;
};

// The address range of libcumemtrace.so itself, whose frames are cut from every stack and whose functions are
// never wrapped again.
struct AddressRange {
  uintptr_t start = 0;
  uintptr_t end = 0;
  bool Contains(uintptr_t pc) const { return pc >= start && pc < end; }
};
const AddressRange& OwnModuleRange();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_MODULE_MAP_H_
