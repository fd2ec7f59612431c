#include "preload/module_map.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

namespace cumemtrace::preload {
namespace {

struct ScanContext {
  MappedArray<ModuleEntry>* modules;
  size_t added;
};

void ReadBuildId(const dl_phdr_info* info, ModuleEntry* entry) {
  entry->build_id_size = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr)* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uint8_t* name = p + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + ((note->n_namesz + 3) & ~3u);
      const uint8_t* next = desc + ((note->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        uint32_t n = note->n_descsz < kMaxBuildIdBytes ? note->n_descsz : kMaxBuildIdBytes;
        memcpy(entry->build_id, desc, n);
        entry->build_id_size = n;
        return;
      }
      p = next;
    }
  }
}

void ModulePath(const dl_phdr_info* info, char* out, size_t out_size) {
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0') {
    // The main executable has no name in the link map.
    ssize_t n = readlink("/proc/self/exe", out, out_size - 1);
    out[n < 0 ? 0 : n] = '\0';
    return;
  }
  strncpy(out, name, out_size - 1);
  out[out_size - 1] = '\0';
}

int OnModule(dl_phdr_info* info, size_t, void* data) {
  auto* ctx = static_cast<ScanContext*>(data);
  uint64_t start = ~0ull, end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uint64_t s = info->dlpi_addr + ph.p_vaddr;
    if (s < start) start = s;
    if (s + ph.p_memsz > end) end = s + ph.p_memsz;
  }
  if (end == 0) return 0;
  MappedArray<ModuleEntry>& modules = *ctx->modules;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].load_bias == info->dlpi_addr && modules[i].start == start) return 0;
  }
  ModuleEntry entry;
  memset(&entry, 0, sizeof(entry));
  entry.id = static_cast<uint32_t>(modules.size() + 1);
  entry.load_bias = info->dlpi_addr;
  entry.start = start;
  entry.end = end;
  ModulePath(info, entry.path, sizeof(entry.path));
  ReadBuildId(info, &entry);
  if (modules.Push(entry)) ++ctx->added;
  return 0;
}

int FindOwn(dl_phdr_info* info, size_t, void* data) {
  auto* range = static_cast<AddressRange*>(data);
  uintptr_t self = reinterpret_cast<uintptr_t>(&OwnModuleRange);
  uintptr_t start = ~static_cast<uintptr_t>(0), end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t s = info->dlpi_addr + ph.p_vaddr;
    if (s < start) start = s;
    if (s + ph.p_memsz > end) end = s + ph.p_memsz;
  }
  if (self >= start && self < end) {
    range->start = start;
    range->end = end;
    return 1;
  }
  return 0;
}

}  // namespace

size_t ModuleMap::Scan() {
  ScanContext ctx{&modules_, 0};
  dl_iterate_phdr(OnModule, &ctx);
  return ctx.added;
}

const ModuleEntry* ModuleMap::Find(uint64_t pc) const {
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (pc >= modules_[i].start && pc < modules_[i].end) return &modules_[i];
  }
  return nullptr;
}

const AddressRange& OwnModuleRange() {
  static AddressRange range;  // found once; a race finds the same value
  if (range.end == 0) dl_iterate_phdr(FindOwn, &range);
  return range;
}

}  // namespace cumemtrace::preload
