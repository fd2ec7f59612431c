// Symbolize: read (through the reader, which validates), find each module's file, resolve the pcs that need it,
// copy the packets and add what was found. Entries are written only for pcs that gained something; a name the
// preload already wrote is kept.
#include "analyzer/tools/symbolize_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/model/stacks/symbol_table.h"
#include "analyzer/reader/trace_reader.h"
#include "analyzer/tools/debug_info.h"
#include "analyzer/tools/packet_stream.h"
#include "proto/format.h"
#include "proto/trace.pb.h"

namespace cumemtrace::analyzer {
namespace {

namespace pb = ::cumemtrace::format;
constexpr size_t kEntriesPerPacket = 4096;

class Collector : public TraceVisitor {
 public:
  void OnModule(const ModuleInfo& module) override { symbols.AddModule(module); }
  void OnString(uint32_t id, const std::string& value) override {
    symbols.AddString(id, value);
    string_ids.try_emplace(value, id);
    max_string_id = std::max(max_string_id, id);
  }
  void OnSymbol(const SymbolInfo& symbol) override { symbols.AddSymbol(symbol); }
  void OnStackNode(const StackNode& node) override {
    if (!format::IsPythonFramePc(node.pc) && node.pc != 0) pcs.push_back(node.pc);
  }

  SymbolTable symbols;
  absl::flat_hash_map<std::string, uint32_t> string_ids;
  uint32_t max_string_id = 0;
  std::vector<uint64_t> pcs;
};

bool IsFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The module's file: by its path when the build id matches (or the trace has none), else in the debug folders.
std::unique_ptr<ModuleDebugInfo> FindModuleFile(const ModuleInfo& module, const std::vector<std::string>& dirs,
                                                std::string* how) {
  std::vector<std::string> candidates = {module.path};
  for (const std::string& dir : dirs) {
    if (std::string p = BuildIdDebugPath(dir, module.build_id); !p.empty()) candidates.push_back(p);
    candidates.push_back(absl::StrCat(dir, "/", Basename(module.path)));
  }
  for (const std::string& file : candidates) {
    if (!IsFile(file)) continue;
    absl::StatusOr<std::unique_ptr<ModuleDebugInfo>> info = ModuleDebugInfo::Open(file, module.load_bias, dirs);
    if (!info.ok()) continue;
    if (!module.build_id.empty() && (*info)->build_id() != module.build_id) continue;
    *how = file == module.path ? "by path" : absl::StrCat("as ", file);
    if ((*info)->has_dwarf() && (*info)->dwarf_file() != file) {
      absl::StrAppend(how, ", debug info in ", (*info)->dwarf_file());
    }
    if (!(*info)->has_dwarf()) absl::StrAppend(how, ", no debug info: names only");
    return *std::move(info);
  }
  return nullptr;
}

class Output {
 public:
  Output(uint32_t first_string_id, absl::flat_hash_map<std::string, uint32_t>* ids)
      : next_id_(first_string_id), ids_(ids) {}

  uint32_t Intern(const std::string& value) {
    if (value.empty()) return 0;
    auto [it, inserted] = ids_->try_emplace(value, next_id_);
    if (inserted) {
      new_strings_.push_back(value);
      ++next_id_;
    }
    return it->second;
  }
  void Add(const SymbolInfo& s) { symbols_.push_back(s); }
  size_t size() const { return symbols_.size(); }

  absl::Status WriteTo(TraceFileWriter& writer, uint32_t first_string_id) const {
    std::string bytes;
    for (size_t first = 0; first < new_strings_.size(); first += kEntriesPerPacket) {
      pb::Packet packet;
      pb::Strings* strings = packet.mutable_strings();
      strings->set_first_id(static_cast<uint32_t>(first_string_id + first));
      for (size_t i = first; i < std::min(new_strings_.size(), first + kEntriesPerPacket); ++i) {
        strings->add_value(new_strings_[i]);
      }
      packet.SerializeToString(&bytes);
      if (absl::Status s = writer.Write(bytes); !s.ok()) return s;
    }
    for (size_t first = 0; first < symbols_.size(); first += kEntriesPerPacket) {
      pb::Packet packet;
      pb::Symbols* out = packet.mutable_symbols();
      for (size_t i = first; i < std::min(symbols_.size(), first + kEntriesPerPacket); ++i) {
        const SymbolInfo& s = symbols_[i];
        out->add_pc(s.pc);
        out->add_function(s.function);
        out->add_module(s.module);
        out->add_offset(s.offset);
        out->add_file(s.file);
        out->add_line(s.line);
      }
      packet.SerializeToString(&bytes);
      if (absl::Status s = writer.Write(bytes); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  uint32_t next_id_;
  absl::flat_hash_map<std::string, uint32_t>* ids_;
  std::vector<std::string> new_strings_;
  std::vector<SymbolInfo> symbols_;
};

// Copies every whole packet of `input`, adds `output`'s packets before the trailer (kept last).
absl::Status WriteTrace(const std::string& input, const std::string& path, const Output& output,
                        uint32_t first_string_id) {
  std::string trailer;
  const auto copy = [&](uint32_t field, absl::string_view bytes, TraceFileWriter& out) {
    if (field != format::field::packet::kTrailer) return out.Write(bytes);
    trailer.assign(bytes.data(), bytes.size());
    return absl::OkStatus();
  };
  const auto symbols_then_trailer = [&](TraceFileWriter& out) {
    if (absl::Status s = output.WriteTo(out, first_string_id); !s.ok()) return s;
    return trailer.empty() ? absl::OkStatus() : out.Write(trailer);
  };
  return CopyTrace(input, path, copy, symbols_then_trailer);
}

}  // namespace

std::string DefaultSymbolizedPath(const std::string& input) {
  if (absl::EndsWith(input, ".pb")) return absl::StrCat(input.substr(0, input.size() - 3), ".symbolized.pb");
  return absl::StrCat(input, ".symbolized.pb");
}

absl::StatusOr<std::string> Symbolize(const SymbolizeOptions& options) {
  const std::string output_path = options.output.empty() ? DefaultSymbolizedPath(options.input) : options.output;
  if (absl::Status s = RefuseToReplace(output_path); !s.ok()) return s;
  Collector c;
  ReadStats stats;
  if (absl::Status s = ReadTrace(options.input, c, &stats); !s.ok()) return s;
  std::sort(c.pcs.begin(), c.pcs.end());
  c.pcs.erase(std::unique(c.pcs.begin(), c.pcs.end()), c.pcs.end());

  // The pcs that lack file and line, by module (id; 0 = in no module).
  std::map<uint32_t, std::vector<uint64_t>> by_module;
  size_t complete = 0;
  for (uint64_t pc : c.pcs) {
    const SymbolInfo* symbol = c.symbols.FindSymbol(pc);
    if (symbol != nullptr && symbol->file != 0 && symbol->line != 0) {
      ++complete;
      continue;
    }
    const ModuleInfo* module = symbol != nullptr ? c.symbols.FindModule(symbol->module) : nullptr;
    if (module == nullptr) module = c.symbols.ModuleContaining(pc);
    by_module[module != nullptr ? module->id : 0].push_back(pc);
  }

  const uint32_t first_string_id = c.max_string_id + 1;
  Output output(first_string_id, &c.string_ids);
  size_t with_lines = 0, names_only = 0, unresolved = 0;
  std::string found, missing;
  size_t modules_found = 0, modules_missing = 0;
  for (const auto& [module_id, pcs] : by_module) {
    const ModuleInfo* module = module_id != 0 ? c.symbols.FindModule(module_id) : nullptr;
    std::string how;
    std::unique_ptr<ModuleDebugInfo> info =
        module != nullptr ? FindModuleFile(*module, options.debug_dirs, &how) : nullptr;
    if (info == nullptr) {
      unresolved += pcs.size();
      if (module != nullptr) {
        ++modules_missing;
        absl::StrAppend(&missing, "\n  ", module->path, " (build id ",
                        module->build_id.empty() ? "none" : HexBuildId(module->build_id), "): ", pcs.size(),
                        " pcs");
      }
      continue;
    }
    ++modules_found;
    absl::StrAppend(&found, "\n  ", module->path, " ", how);
    for (uint64_t pc : pcs) {
      const ResolvedPc r = info->Resolve(pc);
      const SymbolInfo* old = c.symbols.FindSymbol(pc);
      SymbolInfo s;
      s.pc = pc;
      s.module = module_id;
      if (old != nullptr && old->function != 0) {
        s.function = old->function;
        s.offset = old->offset;
      } else {
        s.function = output.Intern(r.function);
        s.offset = r.offset;
      }
      s.file = output.Intern(r.file);
      s.line = s.file != 0 ? r.line : 0;
      const bool new_name = s.function != 0 && (old == nullptr || old->function == 0);
      if (s.file != 0) {
        ++with_lines;
      } else if (new_name) {
        ++names_only;
      } else {
        ++unresolved;
        continue;
      }
      output.Add(s);
    }
  }
  if (absl::Status s = WriteTrace(options.input, output_path, output, first_string_id); !s.ok()) return s;

  std::string report = absl::StrCat("wrote ", output_path, "\n", c.pcs.size(), " pcs: ", complete,
                                    " already had file and line, ", with_lines, " resolved with file and line, ",
                                    names_only, " with a name only, ", unresolved, " unresolved");
  if (by_module.count(0) != 0) absl::StrAppend(&report, " (", by_module[0].size(), " in no known module)");
  absl::StrAppend(&report, "\nmodules found: ", modules_found, found, "\nmodules missing: ", modules_missing, missing,
                  "\n");
  if (stats.truncated) {
    absl::StrAppend(&report, "note: ", options.input, " is cut off at byte ", stats.truncated_at,
                    "; the copy ends with the last whole packet before it\n");
  }
  return report;
}

}  // namespace cumemtrace::analyzer
