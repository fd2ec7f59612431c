#include "preload/process_tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cumemtrace::preload {
namespace {

// Reads at most size - 1 bytes of `path`, NUL-terminated. Returns the length, or -1.
ssize_t ReadSmallFile(const char* path, char* buffer, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n;
  do {
    n = read(fd, buffer, size - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return -1;
  buffer[n] = '\0';
  return n;
}

// The parent of `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces and parentheses,
// so the fields after it are found from its last ')'). Returns -1 when it cannot be read, 0 for a parent outside
// this pid namespace.
pid_t ParentOf(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  char stat[1024];
  if (ReadSmallFile(path, stat, sizeof(stat)) <= 0) return -1;
  const char* close_paren = strrchr(stat, ')');
  if (close_paren == nullptr || close_paren[1] != ' ' || close_paren[2] == '\0' || close_paren[3] != ' ') return -1;
  char* end = nullptr;
  const long ppid = strtol(close_paren + 4, &end, 10);
  if (end == close_paren + 4 || ppid < 0) return -1;
  return static_cast<pid_t>(ppid);
}

// Whether thread `tid` of `pid` is the flush thread, by the name /proc/<pid>/task/<tid>/comm gives (newline-ended).
bool IsFlushThread(pid_t pid, const char* tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task/%.20s/comm", static_cast<int>(pid), tid);
  char comm[32];
  const ssize_t n = ReadSmallFile(path, comm, sizeof(comm));
  if (n <= 0) return false;  // the thread ended meanwhile
  if (comm[n - 1] == '\n') comm[n - 1] = '\0';
  return strcmp(comm, kFlushThreadName) == 0;
}

// Whether one of `pid`'s threads is the preload's flush thread. Returns -1 when its threads cannot be listed. Lists
// them with getdents64 into a buffer on the stack, not opendir: this runs inside the program's first CUDA call,
// which may come from anywhere, and takes nothing from the program's heap.
int HasFlushThread(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  alignas(8) char entries[4096];
  int found = 0;
  while (found == 0) {
    const long n = syscall(SYS_getdents64, fd, entries, sizeof(entries));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long at = 0; at < n && found == 0;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      uint16_t length;
      memcpy(&length, entries + at + 16, sizeof(length));
      const char* name = entries + at + 19;
      if (name[0] >= '0' && name[0] <= '9' && IsFlushThread(pid, name)) found = 1;
      if (length == 0) break;
      at += length;
    }
  }
  close(fd);
  return found;
}

}  // namespace

AncestorTracing AncestorOf(pid_t pid) {
  pid_t ancestor = ParentOf(pid);
  if (ancestor < 0) return AncestorTracing::kUnknown;
  for (int depth = 0; depth < 64 && ancestor > 0; ++depth) {
    const int has = HasFlushThread(ancestor);
    if (has < 0) return depth == 0 ? AncestorTracing::kUnknown : AncestorTracing::kNo;
    if (has == 1) return AncestorTracing::kYes;
    if (ancestor == 1) break;
    ancestor = ParentOf(ancestor);
  }
  return AncestorTracing::kNo;
}

}  // namespace cumemtrace::preload
