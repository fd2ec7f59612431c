// Text formatting helpers for people. Must never let a name from the trace put control characters on the
// terminal.
#include "analyzer/render/text/text_common.h"

#include <algorithm>
#include <ctime>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cumemtrace::analyzer {

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  // Switch units where one decimal would round up to 1024.0.
  while (value >= 1023.95 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string Seconds(int64_t ns) {
  const bool negative = ns < 0;
  const uint64_t abs_ns = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%s%d.%03d s", negative ? "-" : "", abs_ns / 1000000000, (abs_ns / 1000000) % 1000);
}

std::string UtcDate(int64_t unix_time_ns) {
  if (unix_time_ns <= 0) return "unknown";
  const time_t seconds = static_cast<time_t>(unix_time_ns / 1000000000);
  struct tm tm;
  if (gmtime_r(&seconds, &tm) == nullptr) return "unknown";
  char buffer[64];
  if (std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) return "unknown";
  return buffer;
}

std::string DeviceName(int32_t device) {
  return device == format::kHostDevice ? std::string("host") : absl::StrCat("device ", device);
}

std::string ThreadLabel(uint32_t index, const std::string& name) {
  return name.empty() ? absl::StrCat("#", index) : absl::StrCat(Printable(name), " (#", index, ")");
}

std::string Plural(uint64_t n, const char* singular, const char* plural) {
  return absl::StrCat(n, " ", n == 1 ? singular : plural);
}

std::string Table(const std::vector<std::vector<std::string>>& rows, const std::string& align,
                  const std::string& indent) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c != 0) line += "  ";
      const size_t pad = widths[c] - row[c].size();
      const bool right = c < align.size() && align[c] == 'r';
      if (right) line.append(pad, ' ');
      line += row[c];
      if (!right) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string FrameText(const Frame& f) {
  if (f.kind == FrameKind::kNoPython) return f.function;
  if (f.kind == FrameKind::kPython) {
    // As a traceback reads: where, then what. Paths inside installed packages start at the package.
    std::string where = f.file.empty() ? std::string("??") : Printable(std::string(ShortPath(f.file)));
    if (f.line != 0) absl::StrAppend(&where, ":", f.line);
    return absl::StrCat(where, " ", Printable(f.function));
  }
  std::string out = Printable(f.function);
  if (!f.file.empty()) {
    absl::StrAppend(&out, "  ", Printable(f.file));
    if (f.line != 0) absl::StrAppend(&out, ":", f.line);
  }
  if (!f.function_known) {
    absl::StrAppend(&out, " (", Printable(FrameLocation(f)), ")");
  } else if (!f.module.empty()) {
    absl::StrAppend(&out, "  (", Printable(std::string(Basename(f.module))), ")");
  }
  return out;
}

std::string WhereText(const GroupLabel& label) {
  if (label.user_frame.has_value()) return FrameText(*label.user_frame);
  if (label.group_frame.has_value()) return absl::StrCat(FrameText(*label.group_frame), " (no user frame)");
  return "";
}

std::string GroupLabelText(const GroupLabel& label, uint64_t stack_id) {
  std::string out;
  switch (label.kind) {
    case GroupKey::Kind::kFrame: out = absl::StrCat("at ", FrameText(*label.group_frame)); break;
    case GroupKey::Kind::kFallback:
      out = absl::StrCat("no user frame; in ", FrameText(*label.group_frame));
      break;
    case GroupKey::Kind::kStack: return absl::StrCat("stack #", stack_id);
  }
  if (label.stacks > 1) {
    absl::StrAppend(&out, "  (", label.stacks, " stacks, the largest #", stack_id, ")");
  } else {
    absl::StrAppend(&out, "  (stack #", stack_id, ")");
  }
  return out;
}

void AppendGroups(const std::vector<ResolvedGroup>& groups, uint64_t other_bytes, uint64_t other_count,
                  uint64_t group_count, std::string* out, size_t stacks) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const ResolvedGroup& g = groups[i];
    absl::StrAppendFormat(out, "  %10s %6.1f%%  %-16s  %s\n", HumanBytes(g.bytes), g.share * 100.0,
                          Plural(g.count, "allocation", "allocations"), GroupLabelText(g.label, g.stack_id));
    if (i < stacks) AppendStack(g.frames, g.view, "        ", out);
  }
  if (other_count != 0 && group_count > groups.size()) {
    absl::StrAppendFormat(out, "  %10s in %s from %s more\n", HumanBytes(other_bytes),
                          Plural(other_count, "allocation", "allocations"),
                          Plural(group_count - groups.size(), "group", "groups"));
  }
}

namespace {

// A C++ function's name without its parameter list: "at::detail::empty_cuda(c10::ArrayRef<long>, ...)" ->
// "at::detail::empty_cuda" ("(anonymous namespace)" is part of the name).
std::string WithoutParameters(const std::string& name) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '(' || i == 0) continue;
    if (std::string_view(name).substr(i, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size() - 1;
      continue;
    }
    return name.substr(0, i);
  }
  return name;
}

}  // namespace

std::string PythonFrameText(const Frame& f) {
  std::string where = f.file.empty() ? std::string("??") : Printable(std::string(ShortPath(f.file)));
  if (f.line != 0) absl::StrAppend(&where, ":", f.line);
  return absl::StrCat(Printable(f.function), " (", where, ")");
}

void AppendStack(const std::vector<Frame>& frames, const StackView& view, const std::string& indent,
                 std::string* out) {
  if (!view.python) {
    AppendFrames(frames, frames.size(), indent, out);
    return;
  }
  for (const Frame& f : view.python_frames) absl::StrAppend(out, indent, PythonFrameText(f), "\n");
  if (view.more_python != 0) {
    absl::StrAppend(out, indent, "... ", Plural(view.more_python, "more Python frame", "more Python frames"), "\n");
  }
  if (view.native_frames == 0) return;
  std::string fold = absl::StrCat("[", Plural(view.native_frames, "native frame", "native frames"));
  if (!view.native_first.empty()) {
    const std::string first = WithoutParameters(view.native_first);
    const std::string last = WithoutParameters(view.native_last);
    absl::StrAppend(&fold, ": ", Printable(first));
    if (last != first) absl::StrAppend(&fold, " ... ", Printable(last));
  }
  absl::StrAppend(out, indent, fold, "]\n");
}

void AppendFrames(const std::vector<Frame>& frames, size_t max, const std::string& indent, std::string* out) {
  if (frames.empty()) {
    absl::StrAppend(out, indent, "(no stack)\n");
    return;
  }
  // A run of frames without a name in one module (the insides of a stripped library such as libcudart or
  // libcublas) says nothing frame by frame: it is shown as one line, so the named frames of the caller fit.
  size_t shown = 0;
  for (size_t i = 0; i < frames.size() && shown < max; ++shown) {
    size_t run = 1;
    while (!frames[i].function_known && i + run < frames.size() && !frames[i + run].function_known &&
           frames[i + run].module == frames[i].module && !frames[i].module.empty()) {
      ++run;
    }
    if (run == 1) {
      absl::StrAppend(out, indent, FrameText(frames[i]), "\n");
    } else {
      absl::StrAppend(out, indent, "?? x", run, " (", Printable(std::string(Basename(frames[i].module))),
                      ", unnamed frames)\n");
    }
    i += run;
  }
}

}  // namespace cumemtrace::analyzer
