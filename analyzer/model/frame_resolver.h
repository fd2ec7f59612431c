// Turns stack ids into frames a person can read: function (demangled), module, and later file and line. Results are
// cached per pc, so a report that prints the same frames many times resolves each once.
#ifndef CUMEMTRACE_ANALYZER_MODEL_FRAME_RESOLVER_H_
#define CUMEMTRACE_ANALYZER_MODEL_FRAME_RESOLVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "analyzer/model/stack_table.h"
#include "analyzer/model/symbol_table.h"

namespace cumemtrace::analyzer {

struct Frame {
  uint64_t pc = 0;
  std::string function;              // demangled; "??" when unknown
  std::string module;                // path; "" when unknown
  std::optional<uint64_t> offset;    // pc - module load bias, when the module is known
  std::string file;                  // "" when unknown (filled once traces carry debug info)
  uint32_t line = 0;                 // 0 when unknown
  bool function_known = false;
};

class FrameResolver {
 public:
  static constexpr char kUnknownFunction[] = "??";

  FrameResolver(const StackTable& stacks, const SymbolTable& symbols) : stacks_(stacks), symbols_(symbols) {}

  const Frame& ResolvePc(uint64_t pc);
  // Frames of stack `id`, innermost first, at most `max_frames`.
  std::vector<Frame> ResolveStack(uint64_t id, size_t max_frames);

 private:
  const StackTable& stacks_;
  const SymbolTable& symbols_;
  absl::flat_hash_map<uint64_t, Frame> cache_;
  absl::flat_hash_map<uint32_t, std::string> demangled_;  // by function string id
};

// "libfoo.so+0x1234", "0x7f00..." when nothing is known.
std::string FrameLocation(const Frame& frame);
// The last path component of `path`.
absl::string_view Basename(absl::string_view path);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_FRAME_RESOLVER_H_
