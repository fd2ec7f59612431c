// UnwindMemo (see unwind_memo.h).
#include "preload/unwind_memo.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>

#include "preload/module_map.h"
#include "preload/log.h"

namespace cumemtrace::preload {
namespace {

// Frames an entry holds: CUMEMTRACE_STACK_DEPTH's default (64) and the PyTorch depth (16) fit; deeper requests
// are unwound every time.
constexpr int kMemoFrames = 64;
// Entries by the place's hash: 2^kSetBits sets of kWays. Several stacks can share a place (call paths whose frames add
// up to the same size): they take ways of one set, and a lookup tries each of them.
constexpr uint32_t kSetBits = 4;
constexpr int kWays = 16;
// Frames of ours a walk may pass before the stack's own (the hooks and the recorder: a handful).
constexpr int kMaxOwnFrames = 16;
// When more stacks come and go than the table holds, an entry made is rarely taken: then only one miss in
// kSparseLearning makes an entry (a walk costs about two unwinds), until entries pay again. Judged per
// kLearningWindow lookups.
constexpr uint32_t kSparseLearning = 16;
constexpr uint32_t kLearningWindow = 4096;

struct Entry {
  bool truncated;
  int16_t count;
  uintptr_t pcs[kMemoFrames];
  uint32_t slots[kMemoFrames];  // where pcs[i] lies on the stack: place + slots[i]
};

// What a way holds, apart from its entry, so that a lookup finds the ways of its place in the set's tags (256
// bytes) before it touches an entry (almost 800).
struct Tag {
  uintptr_t place;  // 0: empty
  int16_t max_depth;
  bool keep_outermost;
};

struct Set {
  Tag tags[kWays];
  Entry ways[kWays];
  uint32_t next;  // the way the next entry replaces (round robin)
};

struct Table {
  Set sets[1u << kSetBits];
  // The lookup that missed last, for the Learn after its unwind.
  bool learn;
  // This window's lookups, hits and entries made, and whether misses make entries sparsely.
  uint32_t lookups, hits, entries;
  bool sparse;
  uint32_t misses_skipped;
};

constinit std::atomic<UnwindMemoMode> g_mode{UnwindMemoMode::kOff};
pthread_key_t g_cleanup_key;
// Counted only when checking (CUMEMTRACE_UNWIND_MEMO=check): shared counters would cost the hook time otherwise.
constinit std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_entries{0}, g_mismatches{0};

__thread Table* t_table __attribute__((tls_model("initial-exec")));
__thread bool t_gone __attribute__((tls_model("initial-exec")));  // the thread is exiting: no new table

void UnmapTable(void* table) {
  munmap(table, sizeof(Table));
  t_table = nullptr;
  t_gone = true;  // calls from later destructors of this thread unwind as without the memo
}

Table* ThisThreadsTable() {
  if (t_table != nullptr || t_gone) return t_table;
  void* memory = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    t_gone = true;  // no memory: never try again on this thread
    return nullptr;
  }
  t_table = static_cast<Table*>(memory);
  pthread_setspecific(g_cleanup_key, memory);
  return t_table;
}

Set& SetFor(Table& table, uintptr_t place) {
  return table.sets[((static_cast<uint64_t>(place) >> 3) * 0x9e3779b97f4a7c15ull) >> (64 - kSetBits)];
}

// The entry's frames are in their slots (its tag was checked). Slots are read innermost first and the first that
// differs ends the check: another stack is read no further than its first difference, never past its own frames.
bool Holds(const Entry& e, uintptr_t place) {
  if (e.count <= 0) return false;
  for (int i = 0; i < e.count; ++i) {
    if (*reinterpret_cast<const uintptr_t*>(place + e.slots[i]) != e.pcs[i]) return false;
  }
  return true;
}

// Ends a window of lookups: when the entries made in it were taken fewer than four times each, misses make entries
// only sparsely in the next.
void Judge(Table& t) {
  if (++t.lookups < kLearningWindow) return;
  t.sparse = t.hits < t.entries * 4;
  t.lookups = t.hits = t.entries = 0;
}

bool Counting() { return g_mode.load(std::memory_order_relaxed) == UnwindMemoMode::kCheck; }

}  // namespace

void InitUnwindMemo() {
  const char* value = getenv("CUMEMTRACE_UNWIND_MEMO");
  UnwindMemoMode mode = UnwindMemoMode::kOn;
  if (value != nullptr && strcmp(value, "0") == 0) mode = UnwindMemoMode::kOff;
  if (value != nullptr && strcmp(value, "check") == 0) mode = UnwindMemoMode::kCheck;
  // Once per process (a forked child that traces starts again): the key's destructor frees a table at thread exit.
  static bool key_created = false;
  if (mode != UnwindMemoMode::kOff && !key_created) key_created = pthread_key_create(&g_cleanup_key, UnmapTable) == 0;
  if (!key_created) mode = UnwindMemoMode::kOff;  // no way to free a thread's table when it exits
  g_mode.store(mode, std::memory_order_relaxed);
}

UnwindMemoMode UnwindMemoModeNow() { return g_mode.load(std::memory_order_relaxed); }

int UnwindMemoLookup(uintptr_t place, int max_depth, bool keep_outermost, uintptr_t* pcs, bool* truncated,
                     uint32_t* dropped) {
  if (g_mode.load(std::memory_order_relaxed) == UnwindMemoMode::kOff || max_depth > kMemoFrames) return -1;
  Table* table = ThisThreadsTable();
  if (table == nullptr) return -1;
  Judge(*table);
  Set& set = SetFor(*table, place);
  for (int way = 0; way < kWays; ++way) {
    const Tag& tag = set.tags[way];
    if (tag.place != place || tag.max_depth != max_depth || tag.keep_outermost != keep_outermost) continue;
    const Entry& e = set.ways[way];
    if (!Holds(e, place)) continue;
    memcpy(pcs, e.pcs, sizeof(uintptr_t) * static_cast<size_t>(e.count));
    *truncated = e.truncated;
    *dropped = 0;
    ++table->hits;
    table->learn = false;
    if (Counting()) g_hits.fetch_add(1, std::memory_order_relaxed);
    return e.count;
  }
  table->learn = !table->sparse || ++table->misses_skipped % kSparseLearning == 0;
  if (Counting()) g_misses.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

void UnwindMemoLearn(uintptr_t place, int max_depth, bool keep_outermost, const uintptr_t* pcs, int count,
                     bool truncated, uint32_t dropped) {
  if (t_table == nullptr || max_depth > kMemoFrames || count <= 0 || count > kMemoFrames) return;
  // A stack cut in the middle depends on frames no slot covers; one cut to its innermost frames only where asked.
  if (dropped != 0 || (truncated && keep_outermost)) return;
  if (!t_table->learn) return;  // set by the lookup that missed just before
  t_table->learn = false;

  uint32_t slots[kMemoFrames];
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return;
  const AddressRange& own = OwnModuleRange();
  int program = 0;  // frames of the program seen: they must be pcs[0, count), in order
  for (int steps = 0; steps < count + kMaxOwnFrames + 1; ++steps) {
    unw_word_t ip = 0, sp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    if (!own.Contains(ip)) {
      if (program == count) return;  // deeper than the stack remembered: another stack
      // The unwinder read this frame's address from just below its callee's frame, which is where the frame's
      // stack pointer begins: the slot the lookup checks. Not there (a signal frame): no entry.
      if (unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0 || ip != pcs[program] || sp < place + sizeof(uintptr_t) ||
          sp - sizeof(uintptr_t) - place > UINT32_MAX ||
          *reinterpret_cast<const uintptr_t*>(sp - sizeof(uintptr_t)) != ip) {
        return;
      }
      slots[program++] = static_cast<uint32_t>(sp - sizeof(uintptr_t) - place);
      if (truncated && program == count) break;  // only the innermost frames were asked for
    }
    if (unw_step(&cursor) <= 0) break;
  }
  if (program != count) return;
  Set& set = SetFor(*t_table, place);
  const uint32_t way = set.next++ % kWays;
  // The tag last: a lookup never finds an entry half written (the recorder does not run inside itself; should a
  // signal handler's lookup on this thread come between, it finds no tag).
  set.tags[way].place = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  Entry& e = set.ways[way];
  e.truncated = truncated;
  e.count = static_cast<int16_t>(count);
  memcpy(e.pcs, pcs, sizeof(uintptr_t) * static_cast<size_t>(count));
  memcpy(e.slots, slots, sizeof(uint32_t) * static_cast<size_t>(count));
  std::atomic_signal_fence(std::memory_order_seq_cst);
  set.tags[way] = Tag{place, static_cast<int16_t>(max_depth), keep_outermost};
  ++t_table->entries;
  if (Counting()) g_entries.fetch_add(1, std::memory_order_relaxed);
}

void UnwindMemoNoteMismatch() { g_mismatches.fetch_add(1, std::memory_order_relaxed); }

void UnwindMemoReport() {
  if (!Counting()) return;
  Warn("unwind memo check: %llu stacks remembered, %llu taken from the memo, %llu unwound, %llu memo stacks differed "
       "from the unwinder's",
       static_cast<unsigned long long>(g_entries.load()), static_cast<unsigned long long>(g_hits.load()),
       static_cast<unsigned long long>(g_misses.load()), static_cast<unsigned long long>(g_mismatches.load()));
}

}  // namespace cumemtrace::preload
