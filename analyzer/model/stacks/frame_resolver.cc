// pc -> frame, with a cache per pc and per function name. Must never fail: what is unknown is "??" plus module
// and offset when those are known; a Python frame id the trace never announced reads "??" too.
#include "analyzer/model/stacks/frame_resolver.h"

#include "absl/strings/str_format.h"
#include "analyzer/model/stacks/demangle.h"

namespace cumemtrace::analyzer {
namespace {

const PythonFrameTable& NoPythonFrames() {
  static const PythonFrameTable* const kEmpty = new PythonFrameTable();
  return *kEmpty;
}

}  // namespace

FrameResolver::FrameResolver(const StackTable& stacks, const SymbolTable& symbols)
    : FrameResolver(stacks, symbols, NoPythonFrames()) {}

const Frame& FrameResolver::ResolvePc(uint64_t pc) {
  auto [it, inserted] = cache_.try_emplace(pc);
  Frame& frame = it->second;
  if (!inserted) return frame;
  frame.pc = pc;
  frame.function = kUnknownFunction;
  if (format::IsPythonFramePc(pc)) {
    ResolvePython(pc, frame);
  } else {
    ResolveNative(pc, frame);
  }
  return frame;
}

void FrameResolver::ResolvePython(uint64_t pc, Frame& frame) {
  const uint64_t id = format::PythonFrameIdOfPc(pc);
  if (id == format::kNoPythonFramesId) {
    frame.kind = FrameKind::kNoPython;
    frame.function = kNoPythonFrames;
    frame.function_known = true;
    return;
  }
  frame.kind = FrameKind::kPython;
  const PythonFrameInfo* info = python_frames_.Find(id);
  if (info == nullptr) return;
  if (const std::string& name = symbols_.String(info->function); !name.empty()) {
    frame.function = name;
    frame.function_known = true;
  }
  frame.file = symbols_.String(info->file);
  frame.line = info->line;
}

void FrameResolver::ResolveNative(uint64_t pc, Frame& frame) {
  const ModuleInfo* module = nullptr;
  if (const SymbolInfo* symbol = symbols_.FindSymbol(pc); symbol != nullptr) {
    if (symbol->function != 0 && !symbols_.String(symbol->function).empty()) {
      auto [name, fresh] = demangled_.try_emplace(symbol->function);
      if (fresh) name->second = Demangle(symbols_.String(symbol->function));
      frame.function = name->second;
      frame.function_known = true;
    }
    module = symbols_.FindModule(symbol->module);
    if (symbol->file != 0) frame.file = symbols_.String(symbol->file);
    frame.line = symbol->line;
  }
  if (module == nullptr) module = symbols_.ModuleContaining(pc);
  if (module != nullptr) {
    frame.module = module->path;
    frame.offset = pc - module->load_bias;
  }
}

std::vector<Frame> FrameResolver::ResolveStack(uint64_t id, size_t max_frames) {
  std::vector<Frame> frames;
  for (uint64_t pc : stacks_.Pcs(id, max_frames)) frames.push_back(ResolvePc(pc));
  return frames;
}

absl::string_view Basename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

std::string FrameLocation(const Frame& frame) {
  if (!frame.module.empty() && frame.offset.has_value()) {
    return absl::StrFormat("%s+0x%x", Basename(frame.module), *frame.offset);
  }
  return absl::StrFormat("0x%x", frame.pc);
}

}  // namespace cumemtrace::analyzer
