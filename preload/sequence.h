// Sequence numbers and the low-water mark that makes the trace's event order exact by construction.
//
// Why this exists: a free takes its sequence number before the real free (so that a reuse of the address on another
// thread orders after it) but is appended to the trace only after the real call returns; a thread preempted in
// between (64 threads on one CPU) can append its event hundreds of thousands of events late. A reader with a fixed
// reorder window then processes events out of order and reports wrong numbers. Instead, every number taken ahead of
// its append is "pending" in a slot of a small table until the event is appended (or abandoned), and each event
// batch carries CompleteBelow(): the smallest number that may still arrive. The reader releases exactly the events
// below it, so it never guesses and holds only what is really outstanding.
//
// Numbers, slots and the mark are plain memory guarded by the recorder's lock (recorder_locks.h: `record`), so the
// mark needs no ordering argument: it is exactly the lowest pending number while every thread inside a free finds a
// slot and holds at most kMaxPendingPerThread numbers (beyond the slots it may lag, never pass; beyond the numbers,
// below). No number costs a locked instruction of its own (an allocation takes its number inside the lock it takes anyway; a free takes the lock once more, before
// its real call, where it used to take a slot and the number with two locked instructions of their own: measured in
// docs/performance.md, "The hook alone").
//
// Never: allocate, lock, or block. A thread holds at most kMaxPendingPerThread numbers at once (a runtime free
// around a driver free needs two); a further number is not kept, so should it outlive the thread's older ones the
// mark may pass it, and the reader then counts its event as late and says so (never silently misorders).
#ifndef CUMEMTRACE_PRELOAD_SEQUENCE_H_
#define CUMEMTRACE_PRELOAD_SEQUENCE_H_

#include <stdint.h>

namespace cumemtrace::preload {

// A number for an event appended now (allocations). Called with the recorder's lock held.
uint64_t TakeAppendedSequenceLocked();

// A number for an event appended later (frees): pending until SequenceDoneLocked(seq). Called with the recorder's
// lock held.
uint64_t TakePendingSequenceLocked();

// Whether the calling thread holds `seq` pending (no lock needed: a thread's own numbers are its own).
bool SequencePending(uint64_t seq);

// The event numbered `seq` was appended, or will never be (a null free, tracing stopped). Idempotent; a number the
// calling thread does not hold pending is ignored. Must run on the thread that took the number, with the recorder's
// lock held.
void SequenceDoneLocked(uint64_t seq);

// Every event numbered below the result has been appended, or never will be. Called with the recorder's lock held
// (so that "appended" means "in the batch about to be written, or an earlier one").
uint64_t CompleteBelow();

// The last number handed out (memory samples and allocator attachment place themselves after it). Exact under the
// recorder's lock; outside it, a number handed out recently.
uint64_t LastSequence();

// Times a thread found no free slot (more threads inside a free at once than the table has slots) and held the mark
// back through the table's shared overflow instead (expected 0; the unit tests read it, the trailer does not carry
// it).
uint64_t SequenceOverflows();

// In a forked child, with the recorder's lock held: the parent's other threads are gone, and so are their pending
// numbers.
void ResetPendingAfterFork();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SEQUENCE_H_
