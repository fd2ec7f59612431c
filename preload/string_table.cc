#include "preload/string_table.h"

#include <string.h>

#include "preload/trace_writer.h"

namespace cumemtrace::preload {
namespace {

// Packets stay moderate in size: a reader holds one packet at a time.
constexpr size_t kStringsPerPacket = 512;

}  // namespace

uint64_t StringTable::Hash(const char* text, size_t size) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (size_t i = 0; i < size; ++i) h = (h ^ static_cast<uint8_t>(text[i])) * 1099511628211ull;
  return h;
}

uint32_t StringTable::Intern(const char* text) { return Intern(text, strlen(text)); }

uint32_t StringTable::Intern(const char* text, size_t size) {
  if ((index_.size() == 0 || (offsets_.size() + 1) * 2 > index_.size()) && !Rehash()) return 0;
  size_t mask = index_.size() - 1;
  for (size_t i = Hash(text, size) & mask;; i = (i + 1) & mask) {
    uint32_t id = index_[i];
    if (id == 0) {
      size_t at = chars_.size();
      if (!chars_.Resize(at + size + 1) || !offsets_.Push(at)) return 0;
      memcpy(&chars_[at], text, size);
      chars_[at + size] = '\0';
      index_[i] = static_cast<uint32_t>(offsets_.size());
      return index_[i];
    }
    const char* have = Get(id);
    if (strncmp(have, text, size) == 0 && have[size] == '\0') return id;
  }
}

bool StringTable::Rehash() {
  MappedArray<uint32_t> bigger;
  if (!bigger.Resize(index_.size() == 0 ? 4096 : index_.size() * 2)) return false;
  size_t mask = bigger.size() - 1;
  for (uint32_t id = 1; id <= offsets_.size(); ++id) {
    const char* s = Get(id);
    size_t i = Hash(s, strlen(s)) & mask;
    while (bigger[i] != 0) i = (i + 1) & mask;
    bigger[i] = id;
  }
  index_.Release();
  index_ = bigger;
  return true;
}

bool StringTable::WritePending(ByteBuffer* out) {
  while (first_pending_ <= offsets_.size()) {
    static const char* batch[kStringsPerPacket];  // callers hold the recorder's lock
    size_t n = offsets_.size() + 1 - first_pending_;
    if (n > kStringsPerPacket) n = kStringsPerPacket;
    for (size_t i = 0; i < n; ++i) batch[i] = Get(static_cast<uint32_t>(first_pending_ + i));
    if (!WriteStrings(out, static_cast<uint32_t>(first_pending_), batch, n)) return false;
    first_pending_ += n;
  }
  return true;
}

void StringTable::Reset() {
  chars_.Release();
  offsets_.Release();
  index_.Release();
  first_pending_ = 1;
}

}  // namespace cumemtrace::preload
