// Strings, modules and symbols by id and pc. Must never fail a lookup loudly: unknown ids read as empty.
#include "analyzer/model/stacks/symbol_table.h"

namespace cumemtrace::analyzer {
namespace {

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

}  // namespace

void SymbolTable::AddString(uint32_t id, const std::string& value) {
  if (id == 0) return;  // 0 is always ""
  if (dense_strings_.empty()) dense_strings_.emplace_back();
  if (id < dense_strings_.size()) {
    dense_strings_[id] = value;
  } else if (id == dense_strings_.size() && sparse_strings_.empty()) {
    dense_strings_.push_back(value);
  } else {
    sparse_strings_[id] = value;
  }
}

const std::string& SymbolTable::String(uint32_t id) const {
  if (id < dense_strings_.size()) return dense_strings_[id];
  auto it = sparse_strings_.find(id);
  return it == sparse_strings_.end() ? EmptyString() : it->second;
}

void SymbolTable::AddModule(const ModuleInfo& module) {
  auto [it, inserted] = module_index_.try_emplace(module.id, modules_.size());
  if (inserted) {
    modules_.push_back(module);
  } else {
    modules_[it->second] = module;
  }
}

void SymbolTable::AddSymbol(const SymbolInfo& symbol) { symbols_.insert_or_assign(symbol.pc, symbol); }

const SymbolInfo* SymbolTable::FindSymbol(uint64_t pc) const {
  auto it = symbols_.find(pc);
  return it == symbols_.end() ? nullptr : &it->second;
}

const ModuleInfo* SymbolTable::FindModule(uint32_t id) const {
  auto it = module_index_.find(id);
  return it == module_index_.end() ? nullptr : &modules_[it->second];
}

const ModuleInfo* SymbolTable::ModuleContaining(uint64_t pc) const {
  // Linear and newest first: it runs only for frames a report prints (cached by FrameResolver), and a library
  // unloaded and another mapped at its address must resolve to the newer one.
  for (size_t i = modules_.size(); i-- > 0;) {
    if (pc >= modules_[i].start && pc < modules_[i].end) return &modules_[i];
  }
  return nullptr;
}

}  // namespace cumemtrace::analyzer
