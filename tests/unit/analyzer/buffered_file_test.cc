// BufferedFile: the bytes and counts Ensure gives, and the size of its window. A regular file with less than a chunk
// left gets a window of what is left (plus kTailSlack); every count Ensure returns must be the one the full 4 MiB
// window gave, for any file that does not grow while it is read.
#include "analyzer/reader/buffered_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kChunk = BufferedFile::kChunkSize;
constexpr size_t kSlack = BufferedFile::kTailSlack;

std::string Bytes(size_t n, uint32_t seed) {
  std::string out(n, '\0');
  uint32_t x = seed;
  for (char& c : out) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

std::string WriteFile(const std::string& name, const std::string& bytes, const char* mode = "wb") {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), mode);
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  EXPECT_EQ(std::fclose(f), 0);
  return path;
}

std::unique_ptr<BufferedFile> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<BufferedFile>> file = BufferedFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

size_t EnsureOrDie(BufferedFile& f, size_t n) {
  absl::StatusOr<size_t> got = f.Ensure(n);
  EXPECT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got.value_or(0), f.available());
  return got.value_or(0);
}

std::string Window(const BufferedFile& f) {
  return std::string(reinterpret_cast<const char*>(f.data()), f.available());
}

TEST(BufferedFile, SmallFileGetsAWindowOfItsSize) {
  const std::string bytes = Bytes(200, 1);
  const std::string path = WriteFile("small.pb", bytes);
  std::unique_ptr<BufferedFile> f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->CurrentSize(), 200u);
  EXPECT_EQ(EnsureOrDie(*f, 64), 200u);  // the whole file, as a 4 MiB window read it
  EXPECT_EQ(f->capacity(), 200 + kSlack);
  EXPECT_EQ(Window(*f), bytes);
  f->Consume(11);
  EXPECT_EQ(f->offset(), 11u);
  // Asking for a chunk (the reader's zero-tail check does) finds the end, in the same small window.
  EXPECT_EQ(EnsureOrDie(*f, kChunk), 189u);
  EXPECT_EQ(f->capacity(), 200 + kSlack);
  EXPECT_EQ(Window(*f), bytes.substr(11));
  f->Consume(189);
  EXPECT_EQ(EnsureOrDie(*f, 1), 0u);
}

TEST(BufferedFile, EmptyFile) {
  std::unique_ptr<BufferedFile> f = OpenOrDie(WriteFile("empty.pb", ""));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(EnsureOrDie(*f, 64), 0u);
  EXPECT_EQ(f->capacity(), kSlack);
}

// Ensure(n) and Consume(k) in a fixed pseudo-random order over a file of two chunks and more, with packets larger
// than a chunk: every count is the one the old window (a chunk, or the largest n asked, never shrinking) gave, and
// the bytes are the file's. The window is the full chunk until less than a chunk is left.
TEST(BufferedFile, LargeFileCountsAreThoseOfTheFullWindow) {
  const std::string bytes = Bytes(2 * kChunk + kChunk / 3 + 12345, 2);
  const std::string path = WriteFile("large.pb", bytes);
  std::unique_ptr<BufferedFile> f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(EnsureOrDie(*f, 16), kChunk);
  EXPECT_EQ(f->capacity(), kChunk);
  const size_t sizes[] = {1, 11, 64, 4096, 100000, kChunk / 2, kChunk - 1, kChunk, kChunk + 777, 2 * kChunk};
  size_t old_capacity = kChunk;  // the window before sizing to the file
  uint32_t x = 7;
  int steps = 0;
  while (f->offset() + f->available() < bytes.size() || f->available() != 0) {
    x = x * 1664525u + 1013904223u;
    const size_t n = sizes[(x >> 16) % (sizeof(sizes) / sizeof(sizes[0]))];
    const size_t left = bytes.size() - f->offset();
    // The old Ensure: if fewer than n bytes were there, grow to max(n, chunk) and read until n or the end, each
    // read(2) of a regular file filling the window: the window held min(capacity, what is left) after.
    const size_t before = f->available();
    const size_t expected = before >= n ? before : std::min(old_capacity = std::max(old_capacity, n), left);
    ASSERT_EQ(EnsureOrDie(*f, n), expected) << "step " << steps << ", n " << n << ", offset " << f->offset();
    ASSERT_GE(f->capacity(), std::min(n, left));
    ASSERT_TRUE(std::equal(f->data(), f->data() + f->available(),
                           reinterpret_cast<const uint8_t*>(bytes.data()) + f->offset()));
    const size_t consume = std::min<size_t>(f->available(), (x >> 8) % (kChunk / 8) + 1);
    f->Consume(consume);
    ++steps;
  }
  EXPECT_EQ(f->offset(), bytes.size());
  EXPECT_EQ(EnsureOrDie(*f, 1), 0u);
  EXPECT_GT(steps, 10);
}

TEST(BufferedFile, FileThatGrowsIsReadToItsNewEnd) {
  const std::string first = Bytes(100, 3);
  const std::string more = Bytes(3 * kSlack, 4);
  const std::string path = WriteFile("growing.pb", first);
  std::unique_ptr<BufferedFile> f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(EnsureOrDie(*f, 50), 100u);
  EXPECT_EQ(f->capacity(), 100 + kSlack);
  f->Consume(30);
  WriteFile("growing.pb", more, "ab");  // more than the window's slack
  EXPECT_EQ(EnsureOrDie(*f, 1000), 70 + more.size());
  EXPECT_EQ(Window(*f), first.substr(30) + more);
}

TEST(BufferedFile, FileLongerThanItsSizeIsReadToItsEnd) {
  // Files in /proc say 0 bytes and read more: like a file that grows between fstat and read(2), they fill the small
  // window before the end, and the window grows to the full chunk.
  const std::string path = "/proc/self/smaps";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0) GTEST_SKIP() << "no " << path;
  std::unique_ptr<BufferedFile> f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->CurrentSize(), 0u);
  size_t total = 0;
  while (true) {
    const size_t got = EnsureOrDie(*f, kChunk);
    if (got == 0) break;
    total += got;
    f->Consume(got);
  }
  EXPECT_GT(total, kSlack);  // one line per mapping field: far more than 4 KiB
  EXPECT_EQ(f->capacity(), kChunk);
}

TEST(BufferedFile, PipeGetsTheFullWindow) {
  const std::string path = ::testing::TempDir() + "/buffered_pipe";
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string bytes = Bytes(300, 5);
  std::thread writer([&] {
    std::FILE* w = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), w);
    std::fclose(w);
  });
  std::unique_ptr<BufferedFile> f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->CurrentSize(), UINT64_MAX);
  size_t got = EnsureOrDie(*f, 300);
  EXPECT_EQ(f->capacity(), kChunk);  // no size to size it by
  writer.join();
  ::unlink(path.c_str());
  EXPECT_EQ(got, 300u);
  EXPECT_EQ(Window(*f), bytes);
  EXPECT_EQ(EnsureOrDie(*f, 301), 300u);
}

}  // namespace
}  // namespace cumemtrace::analyzer
