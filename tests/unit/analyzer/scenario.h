// Test helper: one small but complete synthetic trace shared by the model, report and CLI tests, with every
// number worked out by hand in scenario.cc's comment.
#ifndef CUMEMTRACE_TESTS_UNIT_ANALYZER_SCENARIO_H_
#define CUMEMTRACE_TESTS_UNIT_ANALYZER_SCENARIO_H_

#include <string>

#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {

// The scenario's packets; `with_trailer` false leaves the end unclean.
TraceBuilder ScenarioTrace(bool with_trailer = true);
// Writes it to a temp file; returns the path.
std::string WriteScenario(const std::string& name, bool with_trailer = true);

}  // namespace cumemtrace::analyzer::test

#endif  // CUMEMTRACE_TESTS_UNIT_ANALYZER_SCENARIO_H_
