// A progress line on stderr for long analyses (a trace of hundreds of millions of events takes a while to read):
// "cumem-analyze: reading run.pb  12.3 M events  [======    ] 61%". Only when stderr is a terminal, only after
// the first half second (short runs print nothing), at most ten redraws a second, and erased when done, so that
// logs, pipes and CI output never see it. Never writes to stdout.
#ifndef CUMEMTRACE_ANALYZER_PROGRESS_H_
#define CUMEMTRACE_ANALYZER_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace cumemtrace::analyzer {

class ProgressBar {
 public:
  // Draws on `err` when it is a terminal (isatty).
  ProgressBar(std::FILE* err, std::string label);
  // For tests: `terminal` decides instead of isatty, and `delay` replaces the half second.
  ProgressBar(std::FILE* err, std::string label, bool terminal, std::chrono::milliseconds delay);
  ~ProgressBar() { Done(); }

  // `fraction` in [0, 1], or negative when unknown (then only the event count is shown).
  void Update(uint64_t events, double fraction);
  // Switches to the next phase ("drawing", ...), keeping the bar's place.
  void SetLabel(std::string label) { label_ = std::move(label); }
  // Erases the line if anything was drawn.
  void Done();

  bool active() const { return terminal_; }
  // Callbacks for AnalyzeOptions::progress (events so far, and the share of the file read when known) and
  // HistoryOptions::progress (a fraction).
  std::function<void(uint64_t, double)> EventsCallback() {
    return [this](uint64_t events, double fraction) { Update(events, fraction); };
  }
  std::function<void(double)> FractionCallback(uint64_t events) {
    return [this, events](double f) { Update(static_cast<uint64_t>(f * static_cast<double>(events)), f); };
  }

 private:
  std::FILE* err_;
  std::string label_;
  bool terminal_;
  std::chrono::milliseconds delay_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  size_t drawn_width_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_PROGRESS_H_
