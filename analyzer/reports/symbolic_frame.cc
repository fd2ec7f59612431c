// SymbolicKey and FlameName.
#include "analyzer/reports/symbolic_frame.h"

#include "absl/strings/str_cat.h"
#include "analyzer/model/stacks/frame_class.h"

namespace cumemtrace::analyzer {
namespace {

// After site-packages/ (the package's own path, the same in every environment), else the base name.
absl::string_view PortableFile(absl::string_view file) {
  const absl::string_view shortened = ShortPath(file);
  return shortened.size() != file.size() ? shortened : Basename(file);
}

std::string Clean(std::string s) {
  for (char& c : s) {
    if (c == ';' || c == '\n' || c == '\r') c = ',';
  }
  return s;
}

}  // namespace

std::string SymbolicKey(const Frame& f) {
  switch (f.kind) {
    case FrameKind::kNoPython: return "marker";
    case FrameKind::kPython: return absl::StrCat("py|", f.function, "|", PortableFile(f.file), "|", f.line);
    case FrameKind::kNative: break;
  }
  if (!f.file.empty()) return absl::StrCat("c|", f.function, "|", PortableFile(f.file), "|", f.line);
  return absl::StrCat("c|", f.function, "|", Basename(f.module), "|0");
}

std::string FlameName(const Frame& f) {
  if (f.kind == FrameKind::kNoPython) return Clean(f.function.empty() ? "<no Python frames>" : f.function);
  if (!f.file.empty()) {
    return Clean(f.line != 0 ? absl::StrCat(f.function, " (", PortableFile(f.file), ":", f.line, ")")
                             : absl::StrCat(f.function, " (", PortableFile(f.file), ")"));
  }
  if (!f.module.empty()) return Clean(absl::StrCat(f.function, " [", Basename(f.module), "]"));
  return Clean(f.function);
}

std::string SymbolicStackKey(const std::vector<Frame>& frames) {
  std::string key;
  for (const Frame& f : frames) absl::StrAppend(&key, key.empty() ? "" : "\n", SymbolicKey(f));
  return key;
}

}  // namespace cumemtrace::analyzer
