#include "preload/symbolize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload/elf_symbols.h"
#include "preload/mapped_array.h"
#include "preload/module_map.h"
#include "preload/stack_table.h"
#include "preload/trace_writer.h"

namespace cumemtrace::preload {
namespace {

// Packets stay moderate in size: a reader holds one packet at a time.
constexpr size_t kEntriesPerPacket = 4096;

int CompareU64(const void* a, const void* b) {
  uint64_t x = *static_cast<const uint64_t*>(a), y = *static_cast<const uint64_t*>(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

// Function names, interned: id i (1-based) is the NUL-terminated string at offsets_[i - 1] of chars_.
class StringTable {
 public:
  uint32_t Intern(const char* text) {
    uint64_t h = 1469598103934665603ull;
    for (const char* p = text; *p != '\0'; ++p) h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
    if (index_.size() == 0 || (offsets_.size() + 1) * 2 > index_.size()) Rehash();
    size_t mask = index_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint32_t id = index_[i];
      if (id == 0) {
        size_t len = strlen(text) + 1;
        size_t at = chars_.size();
        if (!chars_.Resize(at + len) || !offsets_.Push(at)) return 0;
        memcpy(&chars_[at], text, len);
        index_[i] = static_cast<uint32_t>(offsets_.size());
        return index_[i];
      }
      if (strcmp(Get(id), text) == 0) return id;
    }
  }
  const char* Get(uint32_t id) { return &chars_[offsets_[id - 1]]; }
  size_t size() const { return offsets_.size(); }
  void Release() {
    chars_.Release();
    offsets_.Release();
    index_.Release();
  }

 private:
  void Rehash() {
    MappedArray<uint32_t> bigger;
    if (!bigger.Resize(index_.size() == 0 ? 4096 : index_.size() * 2)) return;
    size_t mask = bigger.size() - 1;
    for (uint32_t id = 1; id <= offsets_.size(); ++id) {
      uint64_t h = 1469598103934665603ull;
      for (const char* p = Get(id); *p != '\0'; ++p) h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
      size_t i = h & mask;
      while (bigger[i] != 0) i = (i + 1) & mask;
      bigger[i] = id;
    }
    index_.Release();
    index_ = bigger;
  }

  MappedArray<char> chars_;
  MappedArray<size_t> offsets_;
  MappedArray<uint32_t> index_;
};

struct Resolved {
  MappedArray<uint64_t> pcs;
  MappedArray<uint32_t> functions;
  MappedArray<uint32_t> modules;
  MappedArray<uint64_t> offsets;
  void Release() {
    pcs.Release();
    functions.Release();
    modules.Release();
    offsets.Release();
  }
};

// Sorted, distinct pcs of all nodes.
void CollectPcs(const StackTable& stacks, MappedArray<uint64_t>* pcs) {
  for (uint64_t id = 1; id <= stacks.node_count(); ++id) pcs->Push(stacks.pc(id));
  if (pcs->empty()) return;
  qsort(pcs->data(), pcs->size(), sizeof(uint64_t), CompareU64);
  size_t out = 1;
  for (size_t i = 1; i < pcs->size(); ++i) {
    if ((*pcs)[i] != (*pcs)[out - 1]) (*pcs)[out++] = (*pcs)[i];
  }
  pcs->Resize(out);
}

}  // namespace

void WriteSymbolTable(ByteBuffer* out, const StackTable& stacks, ModuleMap& modules) {
  Resolved r;
  CollectPcs(stacks, &r.pcs);
  StringTable names;
  ElfSymbols elf;
  const ModuleEntry* loaded = nullptr;
  for (size_t i = 0; i < r.pcs.size(); ++i) {
    uint64_t pc = r.pcs[i];
    const ModuleEntry* module = modules.Find(pc);
    uint32_t function = 0;
    uint64_t offset = 0;
    if (module != nullptr) {
      if (module != loaded) {
        elf.Load(module->path);
        loaded = module;
      }
      // Every pc is a return address: look up the call instruction before it.
      const char* name = elf.Lookup(pc - 1 - module->load_bias, &offset);
      if (name != nullptr) {
        function = names.Intern(name);
        offset += 1;
      }
    }
    r.functions.Push(function);
    r.modules.Push(module != nullptr ? module->id : 0);
    r.offsets.Push(offset);
  }
  elf.Release();

  for (size_t first = 0; first < names.size(); first += kEntriesPerPacket) {
    const char* batch[kEntriesPerPacket];
    size_t n = names.size() - first < kEntriesPerPacket ? names.size() - first : kEntriesPerPacket;
    for (size_t i = 0; i < n; ++i) batch[i] = names.Get(static_cast<uint32_t>(first + i + 1));
    if (!WriteStrings(out, static_cast<uint32_t>(first + 1), batch, n)) out->ClearError();
  }
  for (size_t first = 0; first < r.pcs.size(); first += kEntriesPerPacket) {
    size_t n = r.pcs.size() - first < kEntriesPerPacket ? r.pcs.size() - first : kEntriesPerPacket;
    if (!WriteSymbols(out, &r.pcs[first], &r.functions[first], &r.modules[first], &r.offsets[first], n)) {
      out->ClearError();
    }
  }
  names.Release();
  r.Release();
}

}  // namespace cumemtrace::preload
