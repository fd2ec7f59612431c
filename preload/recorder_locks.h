// The recorder's locks, declared in the one order in which they may be taken: a thread that holds one of them may
// take only those declared after it. The fork handlers take all four in this order (LockAll) so that a child never
// inherits a lock held by a thread that does not exist there.
//
// Which state each lock guards is said where that state is declared (recorder_state.h, health_counters.h).
#ifndef CUMEMTRACE_PRELOAD_RECORDER_LOCKS_H_
#define CUMEMTRACE_PRELOAD_RECORDER_LOCKS_H_

#include <pthread.h>

#include "preload/record_lock.h"

namespace cumemtrace::preload {

struct RecorderLocks {
  // 1. Starting tracing: held throughout Start(), and by a thread that notes an NVTX range before tracing runs.
  pthread_mutex_t start = PTHREAD_MUTEX_INITIALIZER;
  // 2. The module map. Scans take the loader's lock (dl_iterate_phdr), so they run under this one, not `record`.
  pthread_mutex_t modules = PTHREAD_MUTEX_INITIALIZER;
  // 3. The recording side: what every event writes to (the open unit of the output queue, the tables). Every event
  // takes it, so it is a lighter lock than the others (record_lock.h).
  RecordLock record;
  // 4. The writer: the sink and what only the writer touches. The flush thread writes holding this lock alone, so
  // no recording thread waits for I/O.
  pthread_mutex_t io = PTHREAD_MUTEX_INITIALIZER;

  void LockAll() {
    pthread_mutex_lock(&start);
    pthread_mutex_lock(&modules);
    record.Lock();
    pthread_mutex_lock(&io);  // a write in progress ends first: a forked child copies no half-written unit
  }
  void UnlockAll() {
    pthread_mutex_unlock(&io);
    record.Unlock();
    pthread_mutex_unlock(&modules);
    pthread_mutex_unlock(&start);
  }
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_RECORDER_LOCKS_H_
