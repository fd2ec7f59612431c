// The interned Python frames of a trace (PythonFrames packets): id -> function, file and line string ids. Stack
// node pcs with format::kPythonFramePcBit name these ids. Memory grows with unique frames, never with events.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_PYTHON_FRAME_TABLE_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_PYTHON_FRAME_TABLE_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class PythonFrameTable {
 public:
  // A frame announced again with the same id replaces the first (the latest packet wins, as for symbols).
  void Add(const PythonFrameInfo& frame) { frames_.insert_or_assign(frame.id, frame); }
  // nullptr for an id never announced (and for 0, the "no Python frames" marker).
  const PythonFrameInfo* Find(uint64_t id) const {
    auto it = frames_.find(id);
    return it == frames_.end() ? nullptr : &it->second;
  }
  size_t size() const { return frames_.size(); }

 private:
  absl::flat_hash_map<uint64_t, PythonFrameInfo> frames_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_PYTHON_FRAME_TABLE_H_
