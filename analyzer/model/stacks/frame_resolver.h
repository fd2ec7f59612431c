// Turns stack ids into frames a person can read: native frames (function demangled, module, file and line when
// the trace has them) and Python frames (qualified name, file, line), plus the marker a thread without Python
// frames carries. Results are cached per pc, so a report that prints the same frames many times resolves each
// once.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_RESOLVER_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_RESOLVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "analyzer/model/stacks/frame_class.h"
#include "analyzer/model/stacks/python_frame_table.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"

namespace cumemtrace::analyzer {

struct Frame {
  FrameKind kind = FrameKind::kNative;
  uint64_t pc = 0;                   // for Python frames: the stack node's pc (bit 63 set)
  std::string function;              // demangled, or the Python qualified name; "??" when unknown
  std::string module;                // native: the module's path; "" when unknown (always for Python frames)
  std::optional<uint64_t> offset;    // native: pc - module load bias, when the module is known
  std::string file;                  // "" when unknown
  uint32_t line = 0;                 // 0 when unknown
  bool function_known = false;
};

class FrameResolver {
 public:
  static constexpr char kUnknownFunction[] = "??";
  static constexpr char kNoPythonFrames[] = "<no Python frames on this thread>";

  FrameResolver(const StackTable& stacks, const SymbolTable& symbols);
  FrameResolver(const StackTable& stacks, const SymbolTable& symbols, const PythonFrameTable& python_frames)
      : stacks_(stacks), symbols_(symbols), python_frames_(python_frames) {}

  const Frame& ResolvePc(uint64_t pc);
  // Frames of stack `id`, innermost first, at most `max_frames`.
  std::vector<Frame> ResolveStack(uint64_t id, size_t max_frames);

 private:
  void ResolveNative(uint64_t pc, Frame& frame);
  void ResolvePython(uint64_t pc, Frame& frame);

  const StackTable& stacks_;
  const SymbolTable& symbols_;
  const PythonFrameTable& python_frames_;
  absl::flat_hash_map<uint64_t, Frame> cache_;
  absl::flat_hash_map<uint32_t, std::string> demangled_;  // by function string id
};

// "libfoo.so+0x1234", "0x7f00..." when nothing is known.
std::string FrameLocation(const Frame& frame);
// The last path component of `path`.
absl::string_view Basename(absl::string_view path);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_RESOLVER_H_
