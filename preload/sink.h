// The trace file: created exclusively (an existing file is never replaced unless asked), written with plain
// write(2) calls under the recorder's lock. A write error disables the sink after one warning: the traced program
// must keep running exactly as it would untraced.
#ifndef CUMEMTRACE_PRELOAD_SINK_H_
#define CUMEMTRACE_PRELOAD_SINK_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

class Sink {
 public:
  // Returns false (after a warning) if the file cannot be created.
  bool Open(const char* path, bool overwrite);
  // Writes all of `data`; on error warns once and turns the sink off. Returns whether it was written.
  bool Write(const uint8_t* data, size_t size);
  void Close();
  // In a forked child: forget the descriptor without touching the parent's file.
  void Abandon();

  bool is_open() const { return fd_ >= 0; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  char path_[256] = {};
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SINK_H_
