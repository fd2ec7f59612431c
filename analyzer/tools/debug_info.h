// Names, files and lines for program counters of one module, read from an ELF file with libdw (elfutils): the
// module's own binary, or a debug file. Used by `cumem-analyze symbolize` for traces whose process died before it
// wrote its symbols. Separate debug info is looked up by build id in the given folders and /usr/lib/debug, never on
// the network.
#ifndef CUMEMTRACE_ANALYZER_TOOLS_DEBUG_INFO_H_
#define CUMEMTRACE_ANALYZER_TOOLS_DEBUG_INFO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

struct ResolvedPc {
  std::string function;  // raw (mangled) symbol name; "" when unknown
  uint64_t offset = 0;   // pc - symbol start
  std::string file;      // "" when unknown
  uint32_t line = 0;
};

// "DIR/.build-id/xx/rest.debug" for raw build id bytes; "" for an empty id.
std::string BuildIdDebugPath(const std::string& dir, const std::string& build_id);
std::string HexBuildId(const std::string& build_id);

class ModuleDebugInfo {
 public:
  // Opens `file` as a module whose file addresses are at `load_bias` in the trace's pcs. `debug_dirs` (then
  // /usr/lib/debug) are searched by build id when `file` has no DWARF of its own.
  static absl::StatusOr<std::unique_ptr<ModuleDebugInfo>> Open(const std::string& file, uint64_t load_bias,
                                                               const std::vector<std::string>& debug_dirs);
  ~ModuleDebugInfo();
  ModuleDebugInfo(const ModuleDebugInfo&) = delete;
  ModuleDebugInfo& operator=(const ModuleDebugInfo&) = delete;

  // Raw build id bytes of the file ("" when it has none).
  const std::string& build_id() const { return build_id_; }
  bool has_dwarf() const { return has_dwarf_; }
  // Where the DWARF came from: the file itself or a separate debug file ("" without DWARF).
  const std::string& dwarf_file() const { return dwarf_file_; }

  // `pc` is a return address: the call before it is looked up. Innermost source location when inlined.
  ResolvedPc Resolve(uint64_t pc) const;

  struct Search;  // what libdw's debug-file callback needs; defined in the .cc

 private:
  ModuleDebugInfo() = default;

  void* dwfl_ = nullptr;    // Dwfl*
  void* module_ = nullptr;  // Dwfl_Module*
  std::unique_ptr<Search> search_;
  std::string build_id_;
  bool has_dwarf_ = false;
  std::string dwarf_file_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_TOOLS_DEBUG_INFO_H_
