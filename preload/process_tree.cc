#include "preload/process_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

// Whether one of `pid`'s threads is the preload's flush thread. Returns -1 when its threads cannot be listed.
int HasFlushThread(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", static_cast<int>(pid));
  DIR* tasks = opendir(path);
  if (tasks == nullptr) return -1;
  int found = 0;
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const long tid = strtol(entry->d_name, nullptr, 10);
    char comm_path[64];
    snprintf(comm_path, sizeof(comm_path), "/proc/%d/task/%ld/comm", static_cast<int>(pid), tid);
    char comm[32];
    const ssize_t n = ReadSmallFile(comm_path, comm, sizeof(comm));
    if (n <= 0) continue;  // the thread ended meanwhile
    if (comm[n - 1] == '\n') comm[n - 1] = '\0';
    if (strcmp(comm, kFlushThreadName) == 0) {
      found = 1;
      break;
    }
  }
  closedir(tasks);
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
