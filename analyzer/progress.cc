// ProgressBar: one line, redrawn with '\r', padded to erase what was there.
#include "analyzer/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cumemtrace::analyzer {
namespace {

constexpr int kBarWidth = 20;
constexpr auto kRedraw = std::chrono::milliseconds(100);

}  // namespace

ProgressBar::ProgressBar(std::FILE* err, std::string label)
    : ProgressBar(err, std::move(label), err != nullptr && isatty(fileno(err)) == 1, std::chrono::milliseconds(500)) {}

ProgressBar::ProgressBar(std::FILE* err, std::string label, bool terminal, std::chrono::milliseconds delay)
    : err_(err), label_(std::move(label)), terminal_(terminal), delay_(delay),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

void ProgressBar::Update(uint64_t events, double fraction) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < delay_ || (drawn_width_ > 0 && now - last_ < kRedraw)) return;
  last_ = now;
  std::string line = absl::StrCat("cumem-analyze: ", label_, "  ",
                                  absl::StrFormat("%.1f M events", static_cast<double>(events) / 1e6));
  if (fraction >= 0) {
    const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kBarWidth);
    absl::StrAppend(&line, "  [", std::string(filled, '='), std::string(kBarWidth - filled, ' '), "] ",
                    static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100), "%");
  }
  const size_t width = line.size();
  if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
  drawn_width_ = std::max(drawn_width_, width);
  std::fputs(("\r" + line).c_str(), err_);
  std::fflush(err_);
}

void ProgressBar::Done() {
  if (!terminal_ || drawn_width_ == 0) return;
  // The line blanked out, between two carriage returns.
  std::string blank(drawn_width_ + 2, ' ');
  blank.front() = '\r';
  blank.back() = '\r';
  std::fputs(blank.c_str(), err_);
  std::fflush(err_);
  drawn_width_ = 0;
}

}  // namespace cumemtrace::analyzer
