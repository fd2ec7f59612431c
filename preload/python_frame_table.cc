#include "preload/python_frame_table.h"

#include "preload/trace_writer.h"

namespace cumemtrace::preload {
namespace {

constexpr size_t kCodeCacheSlots = 1 << 14;
constexpr size_t kFramesPerPacket = 512;  // three arrays of it on the caller's stack

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  return h ^ (h >> 29);
}

bool SameIdentity(const PythonCodeIdentity& x, const PythonCodeIdentity& y) {
  return x.filename == y.filename && x.qualname == y.qualname && x.linetable == y.linetable &&
         x.firstlineno == y.firstlineno;
}

}  // namespace

uint64_t PythonFrameTable::Find(const MappedArray<Slot>& table, uint64_t a, uint64_t b) {
  if (table.size() == 0) return 0;
  size_t mask = table.size() - 1;
  for (size_t i = Mix(a, b) & mask;; i = (i + 1) & mask) {
    const Slot& s = table[i];
    if (s.id == 0) return 0;
    if (s.a == a && s.b == b) return s.id;
  }
}

bool PythonFrameTable::Insert(MappedArray<Slot>& table, size_t* used, uint64_t a, uint64_t b, uint64_t id) {
  if (table.size() == 0 || (*used + 1) * 2 > table.size()) {
    MappedArray<Slot> bigger;
    if (!bigger.Resize(table.size() == 0 ? 4096 : table.size() * 2)) return false;
    size_t mask = bigger.size() - 1;
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i].id == 0) continue;
      size_t j = Mix(table[i].a, table[i].b) & mask;
      while (bigger[j].id != 0) j = (j + 1) & mask;
      bigger[j] = table[i];
    }
    table.Release();
    table = bigger;
  }
  size_t mask = table.size() - 1;
  size_t i = Mix(a, b) & mask;
  while (table[i].id != 0) i = (i + 1) & mask;
  table[i] = Slot{a, b, id};
  ++*used;
  return true;
}

const PythonFrameTable::Code* PythonFrameTable::FindCode(uintptr_t code, StringTable* strings) {
  if (codes_.size() == 0 && !codes_.Resize(kCodeCacheSlots)) return nullptr;
  Code& slot = codes_[Mix(code, 0) & (kCodeCacheSlots - 1)];
  const PythonCodeIdentity identity = IdentifyPythonCode(code);
  if (slot.code == code && SameIdentity(slot.identity, identity)) return &slot;
  char text[1024];
  size_t n = PythonCodeName(code, text, sizeof(text));
  uint32_t function = strings->Intern(text, n);
  n = PythonCodeFile(code, text, sizeof(text));
  uint32_t file = strings->Intern(text, n);
  if (function == 0 || file == 0) return nullptr;
  slot = Code{code, identity, function, file, next_generation_++};
  return &slot;
}

uint64_t PythonFrameTable::Intern(const RawPythonFrame& frame, StringTable* strings) {
  const Code* code = FindCode(frame.code, strings);
  if (code == nullptr) return 0;
  const uint64_t instr_key = (static_cast<uint64_t>(code->generation) << 32) | static_cast<uint32_t>(frame.instr);
  if (uint64_t id = Find(instr_index_, frame.code, instr_key); id != 0) return id;
  const uint32_t line = PythonLine(frame.code, frame.instr);
  const uint64_t name_key = (static_cast<uint64_t>(code->function) << 32) | code->file;
  uint64_t id = Find(frame_index_, name_key, line);
  if (id == 0) {
    if (!frames_.Push(Frame{code->function, code->file, line})) return 0;
    id = frames_.size();
    if (!Insert(frame_index_, &frame_index_used_, name_key, line, id)) return 0;
  }
  Insert(instr_index_, &instr_index_used_, frame.code, instr_key, id);  // a cache: failing to insert costs nothing
  return id;
}

bool PythonFrameTable::WritePending(ByteBuffer* out) {
  while (first_pending_ <= frames_.size()) {
    uint32_t functions[kFramesPerPacket], files[kFramesPerPacket], lines[kFramesPerPacket];
    size_t n = frames_.size() + 1 - first_pending_;
    if (n > kFramesPerPacket) n = kFramesPerPacket;
    for (size_t i = 0; i < n; ++i) {
      const Frame& f = frames_[first_pending_ - 1 + i];
      functions[i] = f.function;
      files[i] = f.file;
      lines[i] = f.line;
    }
    if (!WritePythonFrames(out, static_cast<uint32_t>(first_pending_), functions, files, lines, n)) return false;
    first_pending_ += n;
  }
  return true;
}

void PythonFrameTable::Reset() {
  codes_.Release();
  frames_.Release();
  frame_index_.Release();
  instr_index_.Release();
  frame_index_used_ = instr_index_used_ = 0;
  first_pending_ = 1;
}

}  // namespace cumemtrace::preload
