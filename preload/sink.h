// The trace file. Traces hold command lines, host names and paths, so the file is private (mode 0600) and created
// exclusively, never through a symbolic link (O_CREAT|O_EXCL|O_NOFOLLOW): an existing file is never replaced unless
// asked, and then (CUMEMTRACE_OVERWRITE=1) only a regular file is: a new file is created beside it and put in its
// place; a device, FIFO, socket, directory or symbolic link at the name is left alone (one warning, no trace).
// Written with plain write(2) calls under the writer's lock (recorder.cc's g_io_lock, mostly by the flush thread;
// not the lock the recording threads take). A write error (disk full, file size limit, I/O error) turns the sink off
// after one warning, but first cuts the file back to its last whole packet (under a file size limit, the whole
// packets that fit are written first) and tries to leave one last packet saying what happened (WriteLast), so the
// analyzer can tell "the disk was full" from "the process was killed". The traced program keeps running exactly as
// it would untraced: the sink never writes past a file size limit, where the kernel would send it SIGXFSZ.
#ifndef CUMEMTRACE_PRELOAD_SINK_H_
#define CUMEMTRACE_PRELOAD_SINK_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

class Sink {
 public:
  // Returns false (after a warning) if the file cannot be created.
  bool Open(const char* path, bool overwrite);
  // Writes all of `data` (whole packets); on error warns once, cuts the file back to the last whole packet that
  // reached it and keeps the descriptor for WriteLast. Never writes past a file size limit (RLIMIT_FSIZE): of what
  // does not fit, the whole packets that do are written, leaving room for WriteLast, and the write fails (EFBIG)
  // without the SIGXFSZ the kernel would send. Returns whether all of it was written.
  bool Write(const uint8_t* data, size_t size);
  // The bytes Write may still put in the file before a file size limit stops it; UINT64_MAX without a limit.
  uint64_t Room() const;
  // After a failed Write: one last attempt to append `data` (a notice), then the sink is closed.
  bool WriteLast(const uint8_t* data, size_t size);
  void Close();
  // In a forked child: forget the descriptor without touching the parent's file.
  void Abandon();

  bool is_open() const { return fd_ >= 0 && !failed_; }
  bool failed() const { return failed_; }
  int failed_errno() const { return failed_errno_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  int fd_ = -1;
  bool failed_ = false;
  int failed_errno_ = 0;
  uint64_t bytes_written_ = 0;
  char path_[256] = {};
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SINK_H_
