// Sequence numbers and the low-water mark that makes the trace's event order exact by construction.
//
// Why this exists: a free takes its sequence number before the real free (so that a reuse of the address on another
// thread orders after it) but is appended to the trace only after the real call returns; a thread preempted in
// between (64 threads on one CPU) can append its event hundreds of thousands of events late. A reader with a fixed
// reorder window then processes events out of order and reports wrong numbers. Instead, every number taken ahead of
// its append is "pending" in a slot of a small lock-free table until the event is appended (or abandoned), and each
// event batch carries CompleteBelow(): the smallest number that may still arrive. The reader releases exactly the
// events below it, so it never guesses and holds only what is really outstanding.
//
// Correctness: a thread publishes a lower bound of its number (the counter's current value) in its slot before it
// takes the number, and clears the slot only after the event is appended under the recorder's lock. CompleteBelow()
// reads the counter first and the slots second; those reads, the bound's store and the counter's increment are
// sequentially consistent, and the clear is a release: so any number below its result was either appended already
// or never will be. The slot keeps the bound it was claimed with until the thread's last pending number is done
// (two locked instructions per free: the claim and the increment). Allocations take their number under the recorder's lock right before
// they are appended: they are never pending.
//
// Never: allocate, lock, or block. A thread holds at most kMaxPendingPerThread numbers at once (a runtime free
// around a driver free); beyond that the slot stays at the oldest, which only delays the mark (still exact).
#ifndef CUMEMTRACE_PRELOAD_SEQUENCE_H_
#define CUMEMTRACE_PRELOAD_SEQUENCE_H_

#include <stdint.h>

namespace cumemtrace::preload {

// A number for an event appended now, under the recorder's lock (allocations).
uint64_t TakeAppendedSequence();

// A number for an event appended later (frees): pending until SequenceDone(seq).
uint64_t TakePendingSequence();

// The event numbered `seq` was appended, or will never be (a null free, tracing stopped). Idempotent; a number the
// calling thread does not hold pending is ignored. Must run on the thread that took the number.
void SequenceDone(uint64_t seq);

// Every event numbered below the result has been appended, or never will be. Called under the recorder's lock (so
// that "appended" means "in the batch about to be written, or an earlier one").
uint64_t CompleteBelow();

// The last number handed out (memory samples and allocator attachment place themselves after it).
uint64_t LastSequence();

// Threads that could not find a free slot and waited (health; expected 0).
uint64_t SequenceSlotWaits();

// In a forked child: the parent's other threads are gone, and so are their pending numbers.
void ResetPendingAfterFork();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SEQUENCE_H_
