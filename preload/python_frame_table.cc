#include "preload/python_frame_table.h"

#include "preload/trace_writer.h"

namespace cumemtrace::preload {
namespace {

constexpr size_t kCodeCacheSlots = 1 << 14;
constexpr size_t kFramesPerPacket = 512;

}  // namespace

const PythonFrameTable::Code* PythonFrameTable::FindCode(uintptr_t code, StringTable* strings) {
  if (codes_.size() == 0 && !codes_.Resize(kCodeCacheSlots)) return nullptr;
  Code& slot = codes_[MixKeys(code, 0) & (kCodeCacheSlots - 1)];
  const PythonCodeIdentity identity = IdentifyPythonCode(code);
  if (slot.code == code && SameIdentity(slot.identity, identity)) return &slot;
  char text[1024];
  size_t n = PythonCodeName(code, text, sizeof(text));
  uint32_t function = strings->Intern(text, n);
  n = PythonCodeFile(code, text, sizeof(text));
  uint32_t file = strings->Intern(text, n);
  if (function == 0 || file == 0) return nullptr;
  slot = Code{code, identity, function, file,
              MixKeys(MixKeys(identity.filename, identity.qualname),
                      MixKeys(identity.linetable, static_cast<uint64_t>(identity.firstlineno)))};
  return &slot;
}

uint64_t PythonFrameTable::Intern(const RawPythonFrame& frame, StringTable* strings) {
  const Code* code = FindCode(frame.code, strings);
  if (code == nullptr) return 0;
  // Keyed by the code object's identity as well as its address: a freed code object's address may come back as
  // another one, and a code object evicted from the code cache keeps its entries when it comes back.
  const uint64_t instr_key = MixKeys(code->identity_hash, static_cast<uint32_t>(frame.instr));
  if (uint64_t id = instr_index_.Find(frame.code, instr_key); id != 0) return id;
  const uint32_t line = PythonLine(frame.code, frame.instr);
  const uint64_t name_key = (static_cast<uint64_t>(code->function) << 32) | code->file;
  uint64_t id = frame_index_.Find(name_key, line);
  if (id == 0) {
    if (!frames_.Push(Frame{code->function, code->file, line})) return 0;
    id = frames_.size();
    if (!frame_index_.Insert(name_key, line, id)) return 0;
  }
  instr_index_.Insert(frame.code, instr_key, id);  // a cache: failing to insert costs nothing
  return id;
}

bool PythonFrameTable::WritePending(ByteBuffer* out) {
  while (first_pending_ <= frames_.size()) {
    // Called under the recorder's lock: static buffers keep the caller's stack small.
    static uint32_t functions[kFramesPerPacket], files[kFramesPerPacket], lines[kFramesPerPacket];
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
  frame_index_.Reset();
  instr_index_.Reset();
  first_pending_ = 1;
  memo_.Reset();
}

}  // namespace cumemtrace::preload
