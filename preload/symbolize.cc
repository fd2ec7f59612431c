#include "preload/symbolize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload/elf_symbols.h"
#include "preload/mapped_array.h"
#include "preload/module_map.h"
#include "preload/stack_table.h"
#include "preload/string_table.h"
#include "preload/trace_writer.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

// Packets stay moderate in size: a reader holds one packet at a time.
constexpr size_t kEntriesPerPacket = 4096;

int CompareU64(const void* a, const void* b) {
  uint64_t x = *static_cast<const uint64_t*>(a), y = *static_cast<const uint64_t*>(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

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
  for (uint64_t id = 1; id <= stacks.node_count(); ++id) {
    if (!format::IsPythonFramePc(stacks.pc(id))) pcs->Push(stacks.pc(id));  // Python frames carry their own names
  }
  if (pcs->empty()) return;
  qsort(pcs->data(), pcs->size(), sizeof(uint64_t), CompareU64);
  size_t out = 1;
  for (size_t i = 1; i < pcs->size(); ++i) {
    if ((*pcs)[i] != (*pcs)[out - 1]) (*pcs)[out++] = (*pcs)[i];
  }
  pcs->Resize(out);
}

}  // namespace

void WriteSymbolTable(ByteBuffer* out, const StackTable& stacks, ModuleMap& modules, StringTable* names) {
  Resolved r;
  CollectPcs(stacks, &r.pcs);
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
        function = names->Intern(name);
        offset += 1;
      }
    }
    r.functions.Push(function);
    r.modules.Push(module != nullptr ? module->id : 0);
    r.offsets.Push(offset);
  }
  elf.Release();

  if (!names->WritePending(out)) out->ClearError();
  for (size_t first = 0; first < r.pcs.size(); first += kEntriesPerPacket) {
    size_t n = r.pcs.size() - first < kEntriesPerPacket ? r.pcs.size() - first : kEntriesPerPacket;
    if (!WriteSymbols(out, &r.pcs[first], &r.functions[first], &r.modules[first], &r.offsets[first], n)) {
      out->ClearError();
    }
  }
  r.Release();
}

}  // namespace cumemtrace::preload
