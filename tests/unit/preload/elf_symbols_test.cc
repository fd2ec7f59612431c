// ELF symbol lookup on this test executable itself: the function a pc lies in, and the offset into it.
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "preload/elf_symbols.h"

extern "C" __attribute__((noinline, used)) int cumemtrace_test_marker_function(int x) { return x * 3 + 1; }

namespace cumemtrace::preload {
namespace {

uintptr_t LoadBias() {
  uintptr_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<uintptr_t*>(data) = info->dlpi_addr;  // the first object is the executable
        return 1;
      },
      &bias);
  return bias;
}

TEST(ElfSymbols, FindsFunctionAndOffsetInOwnExecutable) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  ElfSymbols symbols;
  ASSERT_TRUE(symbols.Load(exe));
  uintptr_t start = reinterpret_cast<uintptr_t>(&cumemtrace_test_marker_function) - LoadBias();
  uint64_t offset = 99;
  const char* name = symbols.Lookup(start + 2, &offset);
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(std::string(name), "cumemtrace_test_marker_function");
  EXPECT_EQ(offset, 2u);
  EXPECT_EQ(symbols.Lookup(0x10, &offset), nullptr);  // below every function
  symbols.Release();
}

TEST(ElfSymbols, RejectsNonElfAndMissingFiles) {
  ElfSymbols symbols;
  EXPECT_FALSE(symbols.Load("/nonexistent/file"));
  EXPECT_FALSE(symbols.Load("/etc/hostname"));
  uint64_t offset = 0;
  EXPECT_EQ(symbols.Lookup(0x1000, &offset), nullptr);
}

}  // namespace
}  // namespace cumemtrace::preload
