// The line a traced process prints at a clean end: numbers people read at a glance, and a command they can paste.
#include "preload/exit_notice.h"

#include <gtest/gtest.h>

#include <string>

namespace cumemtrace::preload {
namespace {

std::string Grouped(uint64_t value) {
  char out[32];
  FormatGrouped(value, out, sizeof(out));
  return out;
}

std::string Size(uint64_t bytes) {
  char out[32];
  FormatSize(bytes, out, sizeof(out));
  return out;
}

std::string Line(const char* path, uint64_t events, uint64_t bytes) {
  char out[1024];
  FormatWroteLine(path, events, bytes, out, sizeof(out));
  return out;
}

TEST(ExitNoticeTest, GroupsDigitsByThree) {
  EXPECT_EQ(Grouped(0), "0");
  EXPECT_EQ(Grouped(999), "999");
  EXPECT_EQ(Grouped(1000), "1 000");
  EXPECT_EQ(Grouped(56000), "56 000");
  EXPECT_EQ(Grouped(1234567), "1 234 567");
  EXPECT_EQ(Grouped(18446744073709551615ull), "18 446 744 073 709 551 615");
}

TEST(ExitNoticeTest, SizesInDecimalUnits) {
  EXPECT_EQ(Size(0), "0 B");
  EXPECT_EQ(Size(999), "999 B");
  EXPECT_EQ(Size(1000), "1.0 kB");
  EXPECT_EQ(Size(1234), "1.2 kB");
  EXPECT_EQ(Size(1234567), "1.2 MB");
  EXPECT_EQ(Size(999999), "1.0 MB");  // never "1000.0 kB"
  EXPECT_EQ(Size(5000000000ull), "5.0 GB");
}

std::string Display(const char* path, const char* created_in, const char* started_in, size_t size = 256) {
  char out[256];
  DisplayPath(path, created_in, started_in, out, size);
  return out;
}

TEST(ExitNoticeTest, ARelativePathIsAbsoluteOnlyWhereTheProgramMovedAway) {
  EXPECT_EQ(Display("run.pb", "/home/u/proj", "/home/u/proj"), "run.pb");
  EXPECT_EQ(Display("run.pb", "/home/u/proj/outputs/12-00", "/home/u/proj"), "/home/u/proj/outputs/12-00/run.pb");
  EXPECT_EQ(Display("t/run.pb", "/", "/home"), "/t/run.pb");
  EXPECT_EQ(Display("/tmp/run.pb", "/a", "/b"), "/tmp/run.pb");  // absolute: as given
  EXPECT_EQ(Display("run.pb", "", "/b"), "run.pb");               // a folder not known: as given
  EXPECT_EQ(Display("run.pb", "/a", ""), "run.pb");
  EXPECT_EQ(Display("run.pb", "/a/long/folder", "/b", 10), "run.pb");  // no room for the whole: as given
}

TEST(ExitNoticeTest, TheWholeLine) {
  EXPECT_EQ(Line("run.1234.pb", 56000, 1234567),
            "wrote run.1234.pb (56 000 events, 1.2 MB): cumem-analyze run.1234.pb");
  EXPECT_EQ(Line("/tmp/a.pb", 1, 120), "wrote /tmp/a.pb (1 event, 120 B): cumem-analyze /tmp/a.pb");
}

TEST(ExitNoticeTest, QuotesPathsAShellWouldSplit) {
  EXPECT_EQ(Line("my run.pb", 2, 10), "wrote my run.pb (2 events, 10 B): cumem-analyze 'my run.pb'");
  EXPECT_EQ(Line("it's.pb", 2, 10), "wrote it's.pb (2 events, 10 B): cumem-analyze 'it'\\''s.pb'");
}

TEST(ExitNoticeTest, NeverOverrunsTheBuffer) {
  char out[16];
  FormatWroteLine("a-rather-long-trace-name.pb", 123456789, 987654321, out, sizeof(out));
  EXPECT_EQ(std::string(out), "wrote a-rather-");
  char tiny[4];
  FormatGrouped(123456, tiny, sizeof(tiny));
  EXPECT_EQ(std::string(tiny), "123");
}

}  // namespace
}  // namespace cumemtrace::preload
