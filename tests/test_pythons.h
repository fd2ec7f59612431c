// The CPython interpreters a test runs under, from the "3.10=/path,3.11=/path" list cmake/test_pythons.cmake puts
// in a compile definition. Header-only: the unit and end-to-end tests each take it.
#ifndef CUMEMTRACE_TESTS_TEST_PYTHONS_H_
#define CUMEMTRACE_TESTS_TEST_PYTHONS_H_

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::test {

struct TestPython {
  std::string version;  // "3.10"
  std::string path;
  int minor() const { return std::stoi(version.substr(version.find('.') + 1)); }
};

inline std::vector<TestPython> ParseTestPythons(const std::string& csv) {
  std::vector<TestPython> found;
  std::stringstream list(csv);
  std::string item;
  while (std::getline(list, item, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) found.push_back({item.substr(0, eq), item.substr(eq + 1)});
  }
  return found;
}

// A test name for the interpreter: "Python310".
inline std::string TestPythonName(const ::testing::TestParamInfo<TestPython>& info) {
  std::string name = "Python" + info.param.version;
  name.erase(std::remove(name.begin(), name.end(), '.'), name.end());
  return name;
}

}  // namespace cumemtrace::test

#endif  // CUMEMTRACE_TESTS_TEST_PYTHONS_H_
