#include "preload/stack_table.h"

#include <string.h>

namespace cumemtrace::preload {
namespace {

// Four independent lanes, one multiply per pc, mixed once at the end: one MixKeys per pc made a chain of
// dependent multiplies as long as the stack. A collision costs only the slow path (the copy decides a hit).
uint64_t HashStack(const uintptr_t* pcs, int count) {
  constexpr uint64_t kOdd = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {1, 2, 3, 4};
  int i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int j = 0; j < 4; ++j) lane[j] = (lane[j] ^ pcs[i + j]) * kOdd;
  }
  for (int j = 0; i < count; ++i, ++j) lane[j] = (lane[j] ^ pcs[i]) * kOdd;
  return MixKeys(MixKeys(lane[0], lane[1]), MixKeys(lane[2] ^ static_cast<uint64_t>(count), lane[3]));
}

}  // namespace

uint64_t StackTable::InternNode(uint64_t parent, uint64_t pc) {
  uint64_t id = node_index_.Find(parent, pc);
  if (id != 0) return id;
  if (!nodes_.Push(Node{parent, pc})) return 0;
  id = nodes_.size();
  if (!node_index_.Insert(parent, pc, id)) return 0;
  return id;
}

void StackTable::Cache(uint64_t hash, const uintptr_t* pcs, int count, uint64_t id) {
  const size_t offset = cached_.size();
  const size_t words = static_cast<size_t>(count) + 1;
  if (offset + words > max_cached_words_ || !cached_.Resize(offset + words)) {
    cached_.Resize(offset);
    return;
  }
  cached_[offset] = id;
  memcpy(&cached_[offset + 1], pcs, static_cast<size_t>(count) * sizeof(uint64_t));
  if (!stack_cache_.Insert(hash, static_cast<uint64_t>(count), offset + 1)) cached_.Resize(offset);
}

uint64_t StackTable::Intern(const uintptr_t* pcs, int count) {
  if (count <= 0) return 0;
  static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "cached stacks are stored as 64-bit words");
  const uint64_t hash = HashStack(pcs, count);
  const uint64_t entry = stack_cache_.Find(hash, static_cast<uint64_t>(count));
  if (entry != 0 && memcmp(&cached_[entry], pcs, static_cast<size_t>(count) * sizeof(uint64_t)) == 0) {
    return cached_[entry - 1];
  }

  uint64_t id = 0;
  for (int i = count - 1; i >= 0; --i) {
    id = InternNode(id, pcs[i]);
    if (id == 0) return 0;
  }
  // A hash collision with a different stack keeps the first one cached; the second one just takes the slow path.
  if (entry == 0) Cache(hash, pcs, count, id);
  return id;
}

void StackTable::Reset() {
  nodes_.Release();
  node_index_.Reset();
  stack_cache_.Reset();
  cached_.Release();
  first_pending_ = 1;
}

}  // namespace cumemtrace::preload
