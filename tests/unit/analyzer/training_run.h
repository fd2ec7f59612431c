// Test helper: a small training run with Python frames, in two variants, for the tests that compare runs (diff)
// and export stacks (folded, pprof, HTML). Worked out by hand:
//
//   t=1 ms       load_model (model.py:5)  allocates 1000 B (B: 900 B), kept to the end
//   each step i  train_step (train.py:10) allocates 500 B and frees it in the same step (10 steps, 10 ms apart)
//   leak only    keep_loss (train.py:42)  allocates 100 B each step and never frees it (1000 B at the end)
//
// Peak, device 0 total: A 1500 B (model + one step), B 900 + 500 + 1000 = 2400 B at the last step.
// B is written by another "machine": its stack ids, addresses and Python file paths differ from A's.
#ifndef CUMEMTRACE_TESTS_UNIT_ANALYZER_TRAINING_RUN_H_
#define CUMEMTRACE_TESTS_UNIT_ANALYZER_TRAINING_RUN_H_

#include <string>

namespace cumemtrace::analyzer::test {

// Writes run A (`leak` false) or B (`leak` true) to a temp file; returns its path.
std::string WriteTrainingRun(const std::string& name, bool leak);

}  // namespace cumemtrace::analyzer::test

#endif  // CUMEMTRACE_TESTS_UNIT_ANALYZER_TRAINING_RUN_H_
