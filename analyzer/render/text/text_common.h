// Formatting for people: sizes (B, KiB, MiB, GiB, TiB with one decimal), times, dates, device names and frames.
// Pure functions; no report logic.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_COMMON_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

// "512 B", "1.5 KiB", "2.0 GiB".
std::string HumanBytes(uint64_t bytes);
// Nanoseconds as seconds: "12.345 s" (negative values keep their sign).
std::string Seconds(int64_t ns);
// A wall-clock date, "2026-11-22 01:52:03 UTC"; "unknown" for 0 or an impossible value.
std::string UtcDate(int64_t unix_time_ns);
// "device 0", or "host" for -1.
std::string DeviceName(int32_t device);
// "name (#3)", or "#3" for an unnamed thread.
std::string ThreadLabel(uint32_t index, const std::string& name);
// One frame: native "function  file:line  (module)", "?? (libfoo.so+0x1234)"; Python "path:line function" with
// the path shortened to what follows site-packages/ or dist-packages/; the marker as it reads.
std::string FrameText(const Frame& frame);
// Appends up to `max` lines of frames, each prefixed by `indent`; consecutive unnamed frames of one module share a
// line; "(no stack)" for an empty stack.
void AppendFrames(const std::vector<Frame>& frames, size_t max, const std::string& indent, std::string* out);
// A Python frame as a PyTorch user reads it: "GPT2Attention.forward (transformers/models/gpt2/modeling_gpt2.py:212)".
std::string PythonFrameText(const Frame& frame);
// Appends a stack: its Python-first view (StackView) when it has Python frames, with the native frames folded
// into one line; else the frames as AppendFrames lays them out.
void AppendStack(const std::vector<Frame>& frames, const StackView& view, const std::string& indent,
                 std::string* out);
// Appends groups, each "  bytes share count label" with its stack, and a line for the groups not listed.
// `stacks`: how many of the groups get their stack printed (the others only their line, which names the place).
void AppendGroups(const std::vector<ResolvedGroup>& groups, uint64_t other_bytes, uint64_t other_count,
                  uint64_t group_count, std::string* out, size_t stacks = SIZE_MAX);
// What a group is keyed by, for the line that heads it: "at train.py:37 train_step", "no user frame; in
// c10::...  (libc10_cuda.so)" or "stack #12", with "(3 stacks, the largest #12)" when it merged several.
std::string GroupLabelText(const GroupLabel& label, uint64_t stack_id);
// Where a group or request was allocated, for a diagnosis line: its user frame, else the frame it is keyed by
// (with "no user frame"), else "".
std::string WhereText(const GroupLabel& label);
// "1 allocation", "3 allocations".
std::string Plural(uint64_t n, const char* singular, const char* plural);
// Lays out `rows` in columns as wide as their widest cell, separated by two spaces, each line prefixed by
// `indent`. `align` holds 'l' or 'r' per column (missing: 'l'). Trailing spaces are trimmed.
std::string Table(const std::vector<std::vector<std::string>>& rows, const std::string& align,
                  const std::string& indent = "");
// Replaces control characters so that a name from the trace cannot break the layout of a text report.
std::string Printable(const std::string& text);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_COMMON_H_
