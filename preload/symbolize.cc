#include "preload/symbolize.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "preload/debug_lines.h"
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
// Bounds on the debug-info pass at exit: a process must not hang at exit because its libraries are huge.
constexpr int64_t kLinesBudgetNs = 5'000'000'000;
constexpr int64_t kModuleBudgetNs = 2'000'000'000;

int CompareU64(const void* a, const void* b) {
  uint64_t x = *static_cast<const uint64_t*>(a), y = *static_cast<const uint64_t*>(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

struct Resolved {
  MappedArray<uint64_t> pcs;
  MappedArray<uint32_t> functions;
  MappedArray<uint32_t> modules;
  MappedArray<uint64_t> offsets;
  MappedArray<uint32_t> files;  // string ids, 0 = unknown
  MappedArray<uint32_t> lines;
  void Release() {
    pcs.Release();
    functions.Release();
    modules.Release();
    offsets.Release();
    files.Release();
    lines.Release();
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

// What the debug-info pass found and where it stopped, for the Notice.
struct LineStats {
  uint64_t pcs_with_lines = 0;
  uint32_t modules = 0;          // modules whose debug info was read
  uint32_t module_cuts = 0;      // modules left part-way at kModuleBudgetNs
  uint32_t too_big = 0;          // modules skipped: debug info over kMaxDebugFileBytes
  bool budget_cut = false;       // stopped at kLinesBudgetNs
  uint64_t pcs_not_looked_up = 0;
};

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool OpenLines(DebugLines* lines, const ModuleEntry& module, int64_t start_ns, LineStats* stats) {
  if (stats->budget_cut || MonotonicNs() - start_ns > kLinesBudgetNs) {
    stats->budget_cut = true;
    return false;
  }
  DebugLines::Open open = lines->OpenModule(module);
  if (open == DebugLines::Open::kTooBig) ++stats->too_big;
  return open == DebugLines::Open::kOk;
}

void FormatNotice(const LineStats& s, size_t pcs, char* out, size_t size) {
  int n = snprintf(out, size, "file and line from debug info for %llu of %zu pcs in %u modules",
                   static_cast<unsigned long long>(s.pcs_with_lines), pcs, s.modules);
  auto append = [&](const char* text, unsigned long long value) {
    if (n >= 0 && static_cast<size_t>(n) < size) n += snprintf(out + n, size - n, text, value);
  };
  if (s.budget_cut) append("; stopped at the %llu s budget", kLinesBudgetNs / 1000000000);
  if (s.pcs_not_looked_up > 0) append("; %llu pcs not looked up", s.pcs_not_looked_up);
  if (s.module_cuts > 0) append("; %llu modules cut at the per-module limit", s.module_cuts);
  if (s.too_big > 0) append("; %llu modules skipped (debug info over the size cap)", s.too_big);
}

}  // namespace

void WriteSymbolTable(ByteBuffer* out, const StackTable& stacks, ModuleMap& modules, StringTable* names) {
  Resolved r;
  CollectPcs(stacks, &r.pcs);
  ElfSymbols elf;
  DebugLines lines;
  LineStats stats;
  const char* lines_env = getenv("CUMEMTRACE_LINES");
  bool want_lines = lines_env == nullptr || strcmp(lines_env, "0") != 0;
  const int64_t start_ns = MonotonicNs();
  int64_t module_start_ns = start_ns;
  bool module_lines = false;  // the current module's debug info is open
  const ModuleEntry* loaded = nullptr;
  for (size_t i = 0; i < r.pcs.size(); ++i) {
    uint64_t pc = r.pcs[i];
    const ModuleEntry* module = modules.Find(pc);
    uint32_t function = 0, file = 0, line = 0;
    uint64_t offset = 0;
    if (module != nullptr) {
      if (module != loaded) {
        elf.Load(module->path);
        loaded = module;
        module_start_ns = MonotonicNs();  // opening the module's debug info counts against its budget too
        module_lines = want_lines && OpenLines(&lines, *module, start_ns, &stats);
        if (module_lines) ++stats.modules;
      }
      // Every pc is a return address: look up the call instruction before it.
      const char* name = elf.Lookup(pc - 1 - module->load_bias, &offset);
      if (name != nullptr) {
        function = names->Intern(name);
        offset += 1;
      }
      if (module_lines) {
        int64_t now = MonotonicNs();
        if (now - start_ns > kLinesBudgetNs) {
          stats.budget_cut = true;
          module_lines = false;
          lines.CloseModule();
        } else if (now - module_start_ns > kModuleBudgetNs) {
          ++stats.module_cuts;
          module_lines = false;
          lines.CloseModule();
        }
      }
      if (module_lines) {
        if (const char* source = lines.Lookup(pc - 1, &line); source != nullptr) {
          file = names->Intern(source);
          if (file != 0) ++stats.pcs_with_lines; else line = 0;
        }
      } else if (want_lines && stats.budget_cut) {
        ++stats.pcs_not_looked_up;
      }
    }
    r.functions.Push(function);
    r.modules.Push(module != nullptr ? module->id : 0);
    r.offsets.Push(offset);
    r.files.Push(file);
    r.lines.Push(line);
  }
  lines.CloseModule();
  elf.Release();

  if (stats.pcs_with_lines > 0) {
    char message[256];
    FormatNotice(stats, r.pcs.size(), message, sizeof(message));
    if (!WriteNotice(out, static_cast<uint32_t>(format::NoticeCode::kSymbolsFromDebugInfo), message, MonotonicNs())) {
      out->ClearError();
    }
  }
  if (!names->WritePending(out)) out->ClearError();
  for (size_t first = 0; first < r.pcs.size(); first += kEntriesPerPacket) {
    size_t n = r.pcs.size() - first < kEntriesPerPacket ? r.pcs.size() - first : kEntriesPerPacket;
    const bool with_lines = stats.pcs_with_lines > 0;
    bool ok = WriteSymbols(out, &r.pcs[first], &r.functions[first], &r.modules[first], &r.offsets[first],
                           with_lines ? &r.files[first] : nullptr, with_lines ? &r.lines[first] : nullptr, n);
    if (!ok) out->ClearError();
  }
  r.Release();
}

}  // namespace cumemtrace::preload
