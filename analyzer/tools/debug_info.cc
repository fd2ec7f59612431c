// ModuleDebugInfo with libdwfl: one Dwfl per module, the module reported at its load bias so that trace pcs are
// its addresses. The find_debuginfo callback looks only in local folders by build id (libdw's standard one may ask
// debuginfod servers over the network).
#include "analyzer/tools/debug_info.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {

struct ModuleDebugInfo::Search {
  std::string main_file;
  std::string build_id;
  std::vector<std::string> dirs;
};

namespace {

constexpr char kSystemDebugDir[] = "/usr/lib/debug";

int FindElf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) { return -1; }

int FindDebugInfo(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, const char* file_name, const char*,
                  GElf_Word, char** debuginfo_file_name) {
  const auto* search = static_cast<const ModuleDebugInfo::Search*>(*userdata);
  // Also asked for .gnu_debugaltlink files with the debug file's name: declined, libdw finds those by build id.
  if (search == nullptr || file_name == nullptr || search->main_file != file_name) return -1;
  for (const std::string& dir : search->dirs) {
    const std::string path = BuildIdDebugPath(dir, search->build_id);
    if (path.empty()) break;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      *debuginfo_file_name = strdup(path.c_str());
      return fd;
    }
  }
  return -1;
}

char* g_no_debuginfo_path = nullptr;

}  // namespace

std::string HexBuildId(const std::string& build_id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : build_id) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

std::string BuildIdDebugPath(const std::string& dir, const std::string& build_id) {
  if (build_id.size() < 2) return "";
  const std::string hex = HexBuildId(build_id);
  return absl::StrCat(dir, "/.build-id/", hex.substr(0, 2), "/", hex.substr(2), ".debug");
}

absl::StatusOr<std::unique_ptr<ModuleDebugInfo>> ModuleDebugInfo::Open(const std::string& file, uint64_t load_bias,
                                                                        const std::vector<std::string>& debug_dirs) {
  static const Dwfl_Callbacks kCallbacks = {FindElf, FindDebugInfo, dwfl_offline_section_address,
                                            &g_no_debuginfo_path};
  std::unique_ptr<ModuleDebugInfo> info(new ModuleDebugInfo());
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  if (dwfl == nullptr) return absl::InternalError(absl::StrCat("libdw: ", dwfl_errmsg(-1)));
  info->dwfl_ = dwfl;
  Dwfl_Module* mod = dwfl_report_elf(dwfl, file.c_str(), file.c_str(), -1, load_bias, false);
  dwfl_report_end(dwfl, nullptr, nullptr);
  if (mod == nullptr) return absl::NotFoundError(absl::StrCat(file, ": ", dwfl_errmsg(-1)));
  info->module_ = mod;
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int n = dwfl_module_build_id(mod, &bits, &vaddr);
  if (n > 0) info->build_id_.assign(reinterpret_cast<const char*>(bits), n);

  info->search_ = std::make_unique<Search>();
  info->search_->main_file = file;
  info->search_->build_id = info->build_id_;
  info->search_->dirs = debug_dirs;
  info->search_->dirs.push_back(kSystemDebugDir);
  void** userdata = nullptr;
  dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata != nullptr) *userdata = info->search_.get();
  Dwarf_Addr bias = 0;
  info->has_dwarf_ = dwfl_module_getdwarf(mod, &bias) != nullptr;
  if (info->has_dwarf_) {
    const char* debug_file = nullptr;
    dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
    info->dwarf_file_ = debug_file != nullptr ? debug_file : file;
  }
  return info;
}

ModuleDebugInfo::~ModuleDebugInfo() {
  if (dwfl_ != nullptr) dwfl_end(static_cast<Dwfl*>(dwfl_));
}

ResolvedPc ModuleDebugInfo::Resolve(uint64_t pc) const {
  ResolvedPc r;
  auto* mod = static_cast<Dwfl_Module*>(module_);
  const GElf_Addr address = pc - 1;
  GElf_Off offset = 0;
  GElf_Sym sym;
  if (const char* name = dwfl_module_addrinfo(mod, address, &offset, &sym, nullptr, nullptr, nullptr);
      name != nullptr) {
    // A symbol version ("__libc_start_main@@GLIBC_2.34" in a .symtab) is not part of the function's name.
    r.function = std::string(name, strcspn(name, "@"));
    r.offset = offset + 1;
  }
  if (has_dwarf_) {
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, address); line != nullptr) {
      int lineno = 0;
      const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (file != nullptr && lineno > 0) {
        r.file = file;
        r.line = static_cast<uint32_t>(lineno);
      }
    }
  }
  return r;
}

}  // namespace cumemtrace::analyzer
