// The preload's line-table decoder against each interpreter's own answer: python_line_table_oracle.py, run by every
// CPython 3.10+ this machine has (cmake/test_pythons.cmake), prints each code object's table and code.co_lines()'s
// line for each of its instructions; the decoder must give the same line for every instruction (tolerance zero).
#include <stdio.h>

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "preload/python_line_table.h"
#include "tests/test_pythons.h"

namespace cumemtrace::preload {
namespace {

using test::TestPython;

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  if (hex == "-") return bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

class LineTable : public ::testing::TestWithParam<TestPython> {};

TEST_P(LineTable, EveryInstructionHasTheInterpretersLine) {
  const std::string command = GetParam().path + " " + ORACLE_SCRIPT;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string output;
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << command;

  std::stringstream lines(output);
  std::string line;
  size_t codes = 0, instructions = 0, with_line = 0, mismatches = 0, declared = 0;
  bool ended = false;
  while (std::getline(lines, line)) {
    std::stringstream fields(line);
    std::string format, hex, expected;
    int first_line = 0;
    size_t units = 0;
    fields >> format;
    if (format == "end") {
      fields >> declared;
      ended = true;
      break;
    }
    fields >> first_line >> hex >> units >> expected;
    ASSERT_TRUE(format == "pairs" || format == "locations") << line;
    const LineTableFormat f = format == "pairs" ? LineTableFormat::kAddressPairs : LineTableFormat::kLocations;
    const std::vector<uint8_t> table = FromHex(hex);
    std::stringstream want(expected == "-" ? "" : expected);
    std::string item;
    for (int32_t unit = 0; std::getline(want, item, ','); ++unit) {
      const uint32_t expected_line = static_cast<uint32_t>(std::stoul(item));
      const uint32_t got = DecodeLine(f, table.data(), table.size(), first_line, unit);
      ++instructions;
      with_line += expected_line != 0 ? 1 : 0;
      if (got != expected_line && ++mismatches <= 5) {
        ADD_FAILURE() << GetParam().version << ": code object at line " << first_line << ", unit " << unit
                      << ": decoded " << got << ", co_lines() says " << expected_line;
      }
    }
    ++codes;
  }
  ASSERT_TRUE(ended) << "the oracle did not finish";
  EXPECT_EQ(codes, declared);
  EXPECT_EQ(mismatches, 0u) << "of " << instructions << " instructions";
  // The modules are large: thousands of code objects and a hundred thousand instructions, nearly all with a line.
  EXPECT_GT(codes, 1000u);
  EXPECT_GT(with_line, instructions / 2);
}

// Before the first instruction (f_lasti == -1) a 3.10 frame is on its first line.
TEST(LineTableEdges, FrameNotStartedIsOnItsFirstLine) {
  const uint8_t table[] = {6, 1};
  EXPECT_EQ(DecodeLine(LineTableFormat::kAddressPairs, table, sizeof(table), 40, -1), 40u);
  EXPECT_EQ(DecodeLine(LineTableFormat::kAddressPairs, table, sizeof(table), 40, 0), 41u);
  EXPECT_EQ(DecodeLine(LineTableFormat::kAddressPairs, table, sizeof(table), 40, 3), 0u);  // past the table
}

// A 3.11+ table read from the middle of an entry is refused rather than misread.
TEST(LineTableEdges, LocationTableOutOfStepIsRefused) {
  const uint8_t table[] = {0x05, 0x80};
  EXPECT_EQ(DecodeLine(LineTableFormat::kLocations, table, sizeof(table), 10, 0), 0u);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, LineTable, ::testing::ValuesIn(test::ParseTestPythons(TEST_PYTHONS)),
                         test::TestPythonName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LineTable);

}  // namespace
}  // namespace cumemtrace::preload
