// A buffered writer to a FILE*, for outputs too large to build in memory first (the events dump). Collects text
// in a string and writes it out in large blocks; remembers whether any write failed (a closed pipe, a full disk).
#ifndef CUMEMTRACE_ANALYZER_RENDER_OUTPUT_H_
#define CUMEMTRACE_ANALYZER_RENDER_OUTPUT_H_

#include <cstdio>
#include <string>

namespace cumemtrace::analyzer {

class BufferedOutput {
 public:
  static constexpr size_t kFlushAt = size_t{1} << 20;

  explicit BufferedOutput(std::FILE* file) : file_(file) { buffer_.reserve(kFlushAt + 4096); }
  ~BufferedOutput() { Flush(); }

  std::string* buffer() { return &buffer_; }
  // Writes the buffer out if it is large.
  void MaybeFlush() {
    if (buffer_.size() >= kFlushAt) Flush();
  }
  void Flush() {
    if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) failed_ = true;
    buffer_.clear();
  }
  bool failed() const { return failed_; }

 private:
  std::FILE* file_;
  std::string buffer_;
  bool failed_ = false;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_OUTPUT_H_
