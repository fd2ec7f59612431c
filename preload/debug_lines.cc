// DebugLines through libdwfl (elfutils), every function reached through pointers found with dlsym on a handle of
// our own dlopen: nothing here is linked. One Dwfl per module, so memory is given back between modules. Runs only at
// exit under the recorder's lock (one thread): the file-static state below needs no lock.
#include "preload/debug_lines.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/module_map.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

struct LibDw {
  decltype(&::dwfl_begin) begin;
  decltype(&::dwfl_end) end;
  decltype(&::dwfl_report_elf) report_elf;
  decltype(&::dwfl_report_end) report_end;
  decltype(&::dwfl_module_getdwarf) getdwarf;
  decltype(&::dwfl_module_info) info;
  decltype(&::dwfl_module_getsrc) getsrc;
  decltype(&::dwfl_lineinfo) lineinfo;
  decltype(&::dwfl_offline_section_address) section_address;
};

constexpr char kDebugRoot[] = "/usr/lib/debug/.build-id/";

LibDw g_dw;
int g_load_state = 0;  // 0 not tried, 1 loaded, -1 unavailable

// The module being opened: its path (the main file libdwfl asks about) and its build-id debug file.
const char* g_main_path = nullptr;
char g_build_id_path[sizeof(kDebugRoot) + 2 * kMaxBuildIdBytes + 8];
bool g_too_big = false;

template <typename F>
bool Find(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(RealDlsym()(handle, name));
  return *out != nullptr;
}

bool LoadOnce() {
  if (RealDlsym() == nullptr) return false;
  // libelf first: libdw's own dependency is then the copy already loaded (found through our RUNPATH when bundled).
  dlopen("libelf.so.1", RTLD_NOW | RTLD_LOCAL);
  void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  return Find(h, "dwfl_begin", &g_dw.begin) && Find(h, "dwfl_end", &g_dw.end) &&
         Find(h, "dwfl_report_elf", &g_dw.report_elf) && Find(h, "dwfl_report_end", &g_dw.report_end) &&
         Find(h, "dwfl_module_getdwarf", &g_dw.getdwarf) && Find(h, "dwfl_module_info", &g_dw.info) &&
         Find(h, "dwfl_module_getsrc", &g_dw.getsrc) && Find(h, "dwfl_lineinfo", &g_dw.lineinfo) &&
         Find(h, "dwfl_offline_section_address", &g_dw.section_address);
}

// The main file is always the one reported: never search for another.
int FindElf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) { return -1; }

// Asked when the main file has no DWARF: the debug file named by its build id, never the network. Asked again for a
// .gnu_debugaltlink (dwz) file with the debug file's name: declined, libdw then finds it by build id itself.
int FindDebugInfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char* file_name, const char*, GElf_Word,
                  char** debuginfo_file_name) {
  if (g_main_path == nullptr || file_name == nullptr || strcmp(file_name, g_main_path) != 0) return -1;
  if (g_build_id_path[0] == '\0') return -1;
  int fd = open(g_build_id_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > kMaxDebugFileBytes) {
    g_too_big = true;
    close(fd);
    return -1;
  }
  *debuginfo_file_name = strdup(g_build_id_path);
  return fd;
}

char* g_no_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {FindElf, FindDebugInfo, nullptr, &g_no_debuginfo_path};

void SetBuildIdPath(const ModuleEntry& module) {
  g_build_id_path[0] = '\0';
  if (module.build_id_size < 2) return;
  static const char kHex[] = "0123456789abcdef";
  char* p = g_build_id_path;
  memcpy(p, kDebugRoot, sizeof(kDebugRoot) - 1);
  p += sizeof(kDebugRoot) - 1;
  for (uint32_t i = 0; i < module.build_id_size; ++i) {
    *p++ = kHex[module.build_id[i] >> 4];
    *p++ = kHex[module.build_id[i] & 15];
    if (i == 0) *p++ = '/';
  }
  memcpy(p, ".debug", sizeof(".debug"));
}

}  // namespace

bool DebugLines::Load() {
  if (g_load_state == 0) g_load_state = LoadOnce() ? 1 : -1;
  return g_load_state == 1;
}

DebugLines::Open DebugLines::OpenModule(const ModuleEntry& module) {
  CloseModule();
  if (!Load() || module.path[0] != '/') return Open::kNoDebugInfo;  // "linux-vdso.so.1" is no file
  // Refuse an oversized file before libdw reads any of it (its sections are read, and decompressed, on open).
  struct stat main_st;
  if (stat(module.path, &main_st) == 0 && static_cast<uint64_t>(main_st.st_size) > kMaxDebugFileBytes) {
    return Open::kTooBig;
  }
  Dwfl_Callbacks callbacks = kCallbacks;
  callbacks.section_address = g_dw.section_address;
  Dwfl* dwfl = g_dw.begin(&callbacks);
  if (dwfl == nullptr) return Open::kNoDebugInfo;
  dwfl_ = dwfl;
  g_main_path = module.path;
  g_too_big = false;
  SetBuildIdPath(module);
  Dwfl_Module* mod = g_dw.report_elf(dwfl, module.path, module.path, -1, module.load_bias, false);
  g_dw.report_end(dwfl, nullptr, nullptr);
  Dwarf_Addr bias = 0;
  if (mod == nullptr || g_dw.getdwarf(mod, &bias) == nullptr) {
    bool too_big = g_too_big;
    CloseModule();
    return too_big ? Open::kTooBig : Open::kNoDebugInfo;
  }
  // DWARF in the main file: the size cap applies to that file.
  const char* debug_file = nullptr;
  g_dw.info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
  if (debug_file == nullptr) {
    struct stat st;
    if (stat(module.path, &st) == 0 && static_cast<uint64_t>(st.st_size) > kMaxDebugFileBytes) {
      CloseModule();
      return Open::kTooBig;
    }
  }
  module_ = mod;
  return Open::kOk;
}

const char* DebugLines::Lookup(uint64_t address, uint32_t* line) {
  if (module_ == nullptr) return nullptr;
  Dwfl_Line* l = g_dw.getsrc(static_cast<Dwfl_Module*>(module_), address);
  if (l == nullptr) return nullptr;
  int lineno = 0;
  const char* file = g_dw.lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr);
  if (file == nullptr || file[0] == '\0' || lineno <= 0) return nullptr;
  *line = static_cast<uint32_t>(lineno);
  return file;
}

void DebugLines::CloseModule() {
  if (dwfl_ != nullptr) g_dw.end(static_cast<Dwfl*>(dwfl_));
  dwfl_ = nullptr;
  module_ = nullptr;
  g_main_path = nullptr;
}

}  // namespace cumemtrace::preload
