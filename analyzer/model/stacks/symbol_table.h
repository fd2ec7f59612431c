// What the trace says about code: interned strings, modules (mapped executables and libraries) and the symbols
// the preload resolved for each pc. Lookups only; frame_resolver.cc turns them into frames. Memory grows with
// unique strings, modules and pcs, never with events.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_SYMBOL_TABLE_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_SYMBOL_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class SymbolTable {
 public:
  void AddString(uint32_t id, const std::string& value);
  void AddModule(const ModuleInfo& module);
  void AddSymbol(const SymbolInfo& symbol);

  // String `id`; "" for 0 or an unknown id.
  const std::string& String(uint32_t id) const;
  const SymbolInfo* FindSymbol(uint64_t pc) const;
  const ModuleInfo* FindModule(uint32_t id) const;
  // The most recently announced module whose [start, end) holds `pc`, or nullptr.
  const ModuleInfo* ModuleContaining(uint64_t pc) const;

  size_t symbol_count() const { return symbols_.size(); }
  size_t module_count() const { return modules_.size(); }

 private:
  std::vector<std::string> dense_strings_;  // ids 0.. as they arrive consecutively
  absl::flat_hash_map<uint32_t, std::string> sparse_strings_;
  std::vector<ModuleInfo> modules_;  // in arrival order; a module re-announced with the same id replaces its entry
  absl::flat_hash_map<uint32_t, size_t> module_index_;
  absl::flat_hash_map<uint64_t, SymbolInfo> symbols_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_SYMBOL_TABLE_H_
