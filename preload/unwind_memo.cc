// UnwindMemo (see unwind_memo.h).
#include "preload/unwind_memo.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <utility>

#include "preload/log.h"
#include "preload/module_map.h"
#include "preload/native_stack.h"

namespace cumemtrace::preload {
namespace {

#if !defined(__x86_64__)
#error "the unwind memo reads return addresses at CFA - 8, as x86-64 calls leave them"
#endif

// Frames an entry gives: CUMEMTRACE_STACK_DEPTH's default (64) and the PyTorch depth (16) fit; deeper requests
// are unwound every time. It checks those and our own frames above CaptureStack (the hooks, the recorder).
constexpr int kMemoFrames = 64;
constexpr int kMemoChecks = kMemoFrames + kMaxOwnFrames;
// Entries by the place's hash: 2^kSetBits sets of kWays. Several stacks can share a place (call paths whose frames
// add up to the same size): they take ways of one set, and a lookup tries each of them.
constexpr uint32_t kSetBits = 4;
constexpr int kWays = 16;
// When more stacks come and go than the table holds, an entry made is rarely taken: then only one miss in
// kSparseLearning tries to make an entry (a walk costs about two unwinds), until entries pay again. Judged per
// kLearningWindow lookups.
constexpr uint32_t kSparseLearning = 16;
constexpr uint32_t kLearningWindow = 4096;
// One hit in this many is unwound as well and compared (CUMEMTRACE_UNWIND_MEMO=check: every hit).
constexpr uint32_t kVerifyEvery = 256;

struct Entry {
  bool truncated;
  int16_t count;   // frames it gives: frames[0, count)
  int16_t checks;  // stack slots checked: the frames from CaptureStack's caller outward, ours included
  uint32_t slots[kMemoChecks];  // where a frame's return address (or a saved rbp) lies: place + slots[i]
  uintptr_t values[kMemoChecks];
  // The program's frames among the checked values, in order, kept apart so that a hit copies them in one piece
  // (our own frames and saved rbps lie between them).
  uintptr_t frames[kMemoFrames];
  uint64_t note[2];  // the caller's (UnwindMemoLookup)
};

// The places and requests of a set's ways, apart from their entries: a lookup finds its place's ways here (6
// cache lines) before it touches an entry (1.2 KB). With the entry's first check (the program's innermost frame,
// Learn), so that the ways of other call sites at the same place are passed over without reading their entries.
struct Tag {
  uintptr_t place;  // 0: empty
  int16_t max_depth;
  bool keep_outermost;
  uint32_t first_slot;
  uintptr_t first_value;
};

struct Set {
  alignas(64) Tag tags[kWays];
  Entry ways[kWays];
  uint32_t next;  // the way the next entry replaces (round robin)
};

struct Table {
  Set sets[1u << kSetBits];
  // The lookup that missed last, for the Learn after its unwind.
  bool learn;
  // The entry the last hit came from (dropped if it proves wrong).
  Set* hit_set;
  int hit_way;
  uint32_t hits_since_verify;
  // This window's lookups, hits and attempts to make an entry, and whether misses make entries sparsely.
  uint32_t lookups, hits, attempts;
  bool sparse;
  uint32_t misses_skipped;
};

constinit std::atomic<UnwindMemoMode> g_mode{UnwindMemoMode::kOff};
pthread_key_t g_cleanup_key;
// Counted only when checking (CUMEMTRACE_UNWIND_MEMO=check): shared counters would cost the hook time otherwise.
constinit std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_entries{0}, g_mismatches{0};
constinit std::atomic<bool> g_mismatch_warned{false};

__thread Table* t_table __attribute__((tls_model("initial-exec")));
__thread bool t_gone __attribute__((tls_model("initial-exec")));  // the thread is exiting: no new table

void UnmapTable(void* table) {
  t_table = nullptr;
  t_gone = true;  // calls from later destructors of this thread unwind as without the memo
  std::atomic_signal_fence(std::memory_order_seq_cst);  // a signal handler never finds the table unmapped
  munmap(table, sizeof(Table));
}

Table* ThisThreadsTable() {
  if (t_table != nullptr || t_gone) return t_table;
  void* memory = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    t_gone = true;  // no memory: never try again on this thread
    return nullptr;
  }
  if (pthread_setspecific(g_cleanup_key, memory) != 0) {  // it could not be freed at thread exit
    munmap(memory, sizeof(Table));
    t_gone = true;
    return nullptr;
  }
  t_table = static_cast<Table*>(memory);
  return t_table;
}

Set& SetFor(Table& table, uintptr_t place) {
  return table.sets[((static_cast<uint64_t>(place) >> 3) * 0x9e3779b97f4a7c15ull) >> (64 - kSetBits)];
}

// The entry's return addresses are in their slots (its tag was checked). Slots are read in the entry's order (the
// program's innermost frame, then the rest innermost first) and the first that differs ends the check.
bool Holds(const Entry& e, uintptr_t place) {
  if (e.count <= 0) return false;
  for (int i = 0; i < e.checks; ++i) {
    if (*reinterpret_cast<const uintptr_t*>(place + e.slots[i]) != e.values[i]) return false;
  }
  return true;
}

// Ends a window of lookups: when it had fewer than four hits per attempt to make an entry (made or not), misses
// try to make entries only sparsely in the next.
void Judge(Table& t) {
  if (++t.lookups < kLearningWindow) return;
  t.sparse = t.hits < t.attempts * 4;
  t.lookups = t.hits = t.attempts = 0;
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

int UnwindMemoLookup(uintptr_t place, int max_depth, bool keep_outermost, uintptr_t* pcs, bool* truncated,
                     uint32_t* dropped, bool* verify, uint64_t** note) {
  *verify = false;
  *note = nullptr;
  if (g_mode.load(std::memory_order_relaxed) == UnwindMemoMode::kOff || max_depth > kMemoFrames) return -1;
  Table* table = ThisThreadsTable();
  if (table == nullptr) return -1;
  Judge(*table);
  Set& set = SetFor(*table, place);
  for (int way = 0; way < kWays; ++way) {
    const Tag& tag = set.tags[way];
    if (tag.place != place || tag.max_depth != max_depth || tag.keep_outermost != keep_outermost ||
        *reinterpret_cast<const uintptr_t*>(place + tag.first_slot) != tag.first_value) {
      continue;
    }
    Entry& e = set.ways[way];
    if (!Holds(e, place)) continue;
    const int n = e.count;
    memcpy(pcs, e.frames, sizeof(uintptr_t) * static_cast<size_t>(n));
    *truncated = e.truncated;
    *dropped = 0;
    *note = e.note;
    ++table->hits;
    table->learn = false;
    table->hit_set = &set;
    table->hit_way = way;
    *verify = Counting() || ++table->hits_since_verify % kVerifyEvery == 0;
    if (Counting()) g_hits.fetch_add(1, std::memory_order_relaxed);
    return n;
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
  ++t_table->attempts;

  uint32_t slots[kMemoChecks];
  uintptr_t values[kMemoChecks];
  int checks = 0;
  int given = 0;  // the program's frames seen: they must be pcs[0, count), in order
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return;
  const AddressRange& own = OwnModuleRange();
  for (int steps = 0; steps < count + kMaxOwnFrames + 2; ++steps) {
    unw_word_t ip = 0, sp = 0, rbp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0 ||
        unw_get_reg(&cursor, UNW_X86_64_RBP, &rbp) != 0) {
      break;
    }
    // A signal frame's address is not a return address, nor is its frame laid out by a call: no entry.
    if (unw_is_signal_frame(&cursor) > 0) return;
    const bool ours = own.Contains(ip);
    if (!ours && (given == count || ip != pcs[given])) return;  // another stack than the one unwound
    if (sp >= place + sizeof(uintptr_t)) {
      // The frame's return address, pushed by its callee's call, is the word just below the frame's stack pointer
      // (its callee's CFA): where the unwinder read it, and where a lookup checks it.
      const uintptr_t slot = sp - sizeof(uintptr_t);
      if (checks == kMemoChecks || slot - place > UINT32_MAX || *reinterpret_cast<const uintptr_t*>(slot) != ip) {
        return;
      }
      slots[checks] = static_cast<uint32_t>(slot - place);
      values[checks++] = ip;
    } else if (!ours) {
      return;  // a frame of the program below CaptureStack's own: cannot be
    }
    given += ours ? 0 : 1;
    if (truncated && given == count) break;  // only the innermost frames were asked for
    // Where the unwinder found this frame's rbp (a callee saved it), before the step moves the cursor on.
    unw_save_loc_t rbp_saved{};
    const bool rbp_located = unw_get_save_loc(&cursor, UNW_X86_64_RBP, &rbp_saved) == 0;
    if (unw_step(&cursor) <= 0) break;
    unw_word_t caller_sp = 0, caller_ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_SP, &caller_sp) != 0 || unw_get_reg(&cursor, UNW_REG_IP, &caller_ip) != 0) return;
    if (caller_sp <= place || rbp < sp || rbp >= caller_sp ||
        *reinterpret_cast<const uintptr_t*>(rbp + sizeof(uintptr_t)) != caller_ip) {
      continue;  // no frame pointer: the frame's size is fixed by its address
    }
    // A frame pointer's frame (push rbp; mov rbp, rsp): the compiler gives one to every function whose frame size
    // varies at run time (a variable-length array, alloca, a realigned stack), and the unwinder finds the frame's
    // end from rbp. The frames above it are where the slots say only if rbp is the same, so the slot the unwinder
    // read rbp from is checked too. A realigned frame (its end not at rbp + 16) or an rbp not saved on the stack
    // above CaptureStack's frame (a register, or our frames below it) makes no entry.
    if (rbp + 2 * sizeof(uintptr_t) != caller_sp || !rbp_located || rbp_saved.type != UNW_SLT_MEMORY ||
        rbp_saved.u.addr < place || rbp_saved.u.addr - place > UINT32_MAX || checks == kMemoChecks ||
        *reinterpret_cast<const uintptr_t*>(rbp_saved.u.addr) != rbp) {
      return;
    }
    slots[checks] = static_cast<uint32_t>(rbp_saved.u.addr - place);
    values[checks++] = rbp;
  }
  if (given != count || checks == 0) return;
  // The slot of the program's innermost frame goes first: stacks that share a place (call sites at one depth) share
  // our own frames and usually the outermost ones, and differ there, so a lookup that tries the wrong entry of a
  // set fails at its first read. Every slot is still checked on a hit (the order does not change what Holds means).
  for (int i = 0; i < checks; ++i) {
    if (values[i] != pcs[0]) continue;
    for (int j = i; j > 0; --j) {
      std::swap(slots[j], slots[j - 1]);
      std::swap(values[j], values[j - 1]);
    }
    break;
  }
  Set& set = SetFor(*t_table, place);
  const uint32_t way = set.next++ % kWays;
  // The tag last: a lookup never finds an entry half written (the recorder does not run inside itself; should a
  // signal handler's lookup on this thread come between, it finds no tag).
  set.tags[way].place = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  Entry& e = set.ways[way];
  e.truncated = truncated;
  e.count = static_cast<int16_t>(count);
  e.checks = static_cast<int16_t>(checks);
  memcpy(e.slots, slots, sizeof(uint32_t) * static_cast<size_t>(checks));
  memcpy(e.values, values, sizeof(uintptr_t) * static_cast<size_t>(checks));
  memcpy(e.frames, pcs, sizeof(uintptr_t) * static_cast<size_t>(count));  // checked above: the program's frames
  e.note[0] = e.note[1] = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  set.tags[way] = Tag{place, static_cast<int16_t>(max_depth), keep_outermost, slots[0], values[0]};
  if (Counting()) g_entries.fetch_add(1, std::memory_order_relaxed);
}

void UnwindMemoMismatch() {
  g_mismatches.fetch_add(1, std::memory_order_relaxed);
  if (t_table != nullptr && t_table->hit_set != nullptr) t_table->hit_set->tags[t_table->hit_way].place = 0;
  if (Counting()) return;  // checking: counted, said at exit
  // Outside a check a wrong stack is a defect of the memo: it is turned off for the process, and said once.
  g_mode.store(UnwindMemoMode::kOff, std::memory_order_relaxed);
  if (!g_mismatch_warned.exchange(true)) {
    Warn("the unwind memo gave a stack the unwinder does not; every stack is unwound from now on "
         "(CUMEMTRACE_UNWIND_MEMO=0 turns the memo off from the start)");
  }
}

void UnwindMemoReport() {
  if (!Counting()) return;
  Warn("unwind memo check: %llu stacks remembered, %llu taken from the memo, %llu unwound, %llu memo stacks differed "
       "from the unwinder's",
       static_cast<unsigned long long>(g_entries.load()), static_cast<unsigned long long>(g_hits.load()),
       static_cast<unsigned long long>(g_misses.load()), static_cast<unsigned long long>(g_mismatches.load()));
}

}  // namespace cumemtrace::preload
