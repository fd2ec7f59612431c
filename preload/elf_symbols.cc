#include "preload/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cumemtrace::preload {
namespace {

template <typename T>
const T* At(const void* base, size_t size, uint64_t offset, uint64_t count = 1) {
  if (offset > size || count > (size - offset) / sizeof(T)) return nullptr;
  return reinterpret_cast<const T*>(static_cast<const char*>(base) + offset);
}

int CompareStart(const void* a, const void* b) {
  uint64_t x = *static_cast<const uint64_t*>(a), y = *static_cast<const uint64_t*>(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace

bool ElfSymbols::Load(const char* path) {
  Release();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return false;
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  map_ = map;
  map_size_ = st.st_size;

  const auto* eh = At<Elf64_Ehdr>(map_, map_size_, 0);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
    Release();
    return false;
  }
  const auto* sections = At<Elf64_Shdr>(map_, map_size_, eh->e_shoff, eh->e_shnum);
  if (sections == nullptr) {
    Release();
    return false;
  }
  // Prefer the full table; stripped libraries (the CUDA libraries, most of PyTorch) only have .dynsym.
  const Elf64_Shdr* table = nullptr;
  for (int pass = 0; pass < 2 && table == nullptr; ++pass) {
    uint32_t wanted = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sections[i].sh_type == wanted && sections[i].sh_entsize == sizeof(Elf64_Sym)) table = &sections[i];
    }
  }
  if (table == nullptr || table->sh_link >= eh->e_shnum) return true;  // readable, just no names
  const Elf64_Shdr& strtab = sections[table->sh_link];
  const auto* syms = At<Elf64_Sym>(map_, map_size_, table->sh_offset, table->sh_size / sizeof(Elf64_Sym));
  const char* strings = At<char>(map_, map_size_, strtab.sh_offset, strtab.sh_size);
  if (syms == nullptr || strings == nullptr || strtab.sh_size == 0) return true;
  size_t count = table->sh_size / sizeof(Elf64_Sym);
  for (size_t i = 0; i < count; ++i) {
    const Elf64_Sym& s = syms[i];
    int type = ELF64_ST_TYPE(s.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_value == 0 || s.st_shndx == SHN_UNDEF) continue;
    if (s.st_name >= strtab.sh_size) continue;
    // Names are NUL-terminated inside the string table; the last byte of a well-formed table is NUL.
    if (strings[strtab.sh_size - 1] != '\0') break;
    symbols_.Push(Symbol{s.st_value, s.st_size, strings + s.st_name});
  }
  qsort(symbols_.data(), symbols_.size(), sizeof(Symbol), CompareStart);
  return true;
}

void ElfSymbols::Release() {
  if (map_ != nullptr) munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
  symbols_.Release();
}

ElfScan ForEachElfSymbol(const char* path, void (*visit)(const char*, uint64_t, uint64_t, void*), void* context) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ElfScan::kNoFile;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return ElfScan::kNoFile;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return ElfScan::kNoFile;
  ElfScan result = ElfScan::kNoFile;
  const auto* eh = At<Elf64_Ehdr>(map, size, 0);
  const Elf64_Shdr* sections = nullptr;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64) {
    sections = At<Elf64_Shdr>(map, size, eh->e_shoff, eh->e_shnum);
  }
  if (sections != nullptr) {
    const Elf64_Shdr* table = nullptr;
    for (int pass = 0; pass < 2 && table == nullptr; ++pass) {
      uint32_t wanted = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
      for (int i = 0; i < eh->e_shnum; ++i) {
        if (sections[i].sh_type == wanted && sections[i].sh_entsize == sizeof(Elf64_Sym)) table = &sections[i];
      }
    }
    result = table != nullptr && table->sh_type == SHT_SYMTAB ? ElfScan::kOk : ElfScan::kNoSymtab;
    if (table != nullptr && table->sh_link < eh->e_shnum) {
      const Elf64_Shdr& strtab = sections[table->sh_link];
      const auto* syms = At<Elf64_Sym>(map, size, table->sh_offset, table->sh_size / sizeof(Elf64_Sym));
      const char* strings = At<char>(map, size, strtab.sh_offset, strtab.sh_size);
      // Names are NUL-terminated inside the string table; a table whose last byte is not NUL is not trusted.
      if (syms != nullptr && strings != nullptr && strtab.sh_size != 0 && strings[strtab.sh_size - 1] == '\0') {
        size_t count = table->sh_size / sizeof(Elf64_Sym);
        for (size_t i = 0; i < count; ++i) {
          const Elf64_Sym& s = syms[i];
          if (s.st_shndx == SHN_UNDEF || s.st_name == 0 || s.st_name >= strtab.sh_size) continue;
          visit(strings + s.st_name, s.st_value, s.st_size, context);
        }
      }
    }
  }
  munmap(map, size);
  return result;
}

const char* ElfSymbols::Lookup(uint64_t address, uint64_t* offset) const {
  size_t lo = 0, hi = symbols_.size();
  while (lo < hi) {  // first symbol with start > address
    size_t mid = (lo + hi) / 2;
    if (symbols_[mid].start <= address) lo = mid + 1; else hi = mid;
  }
  // Several symbols may share a start (aliases); any covering one will do. Size 0 symbols (hand-written assembly)
  // cover up to the next symbol.
  for (size_t i = lo; i-- > 0;) {
    const Symbol& s = symbols_[i];
    bool covers = s.size != 0 ? address < s.start + s.size : (i + 1 == symbols_.size() || address < symbols_[i + 1].start);
    if (covers) {
      *offset = address - s.start;
      return s.name;
    }
    if (lo - i > 8) break;  // nested/overlapping symbols are rare; do not scan the whole table
  }
  return nullptr;
}

}  // namespace cumemtrace::preload
