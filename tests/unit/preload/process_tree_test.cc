// AncestorOf: a process sees that one above it traces by the flush thread's name, through processes between them
// and through a name /proc/<pid>/stat cannot split on the first ')'.
#include "preload/process_tree.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <gtest/gtest.h>

namespace cumemtrace::preload {
namespace {

// What AncestorOf says in a grandchild of this process, whose parent is named `parent_name`, as an exit code.
int GrandchildSees(const char* parent_name) {
  const pid_t parent = fork();
  if (parent == 0) {
    prctl(PR_SET_NAME, parent_name);
    const pid_t child = fork();
    if (child == 0) _exit(static_cast<int>(AncestorOf(getpid())));
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) _exit(100);
    _exit(WEXITSTATUS(status));
  }
  int status = 0;
  if (waitpid(parent, &status, 0) != parent || !WIFEXITED(status)) return 101;
  return WEXITSTATUS(status);
}

// A thread of this process that lives while the object does, named `name`.
class NamedThread {
 public:
  explicit NamedThread(const char* name) {
    pthread_create(&thread_, nullptr, &NamedThread::Main, this);
    pthread_setname_np(thread_, name);
  }
  ~NamedThread() {
    stop_ = true;
    pthread_join(thread_, nullptr);
  }

 private:
  static void* Main(void* self) {
    while (!static_cast<NamedThread*>(self)->stop_) usleep(1000);
    return nullptr;
  }
  pthread_t thread_;
  std::atomic<bool> stop_{false};
};

TEST(ProcessTree, NoProcessAboveTraces) {
  EXPECT_EQ(AncestorOf(getpid()), AncestorTracing::kNo);
  EXPECT_EQ(GrandchildSees("wrapper"), static_cast<int>(AncestorTracing::kNo));
}

TEST(ProcessTree, ATracingGrandparentIsSeenThroughTheParent) {
  NamedThread flusher(kFlushThreadName);
  EXPECT_EQ(GrandchildSees("wrapper"), static_cast<int>(AncestorTracing::kYes));
  // A name that looks like the end of the name field and the fields after it.
  EXPECT_EQ(GrandchildSees("x) S 1 (y"), static_cast<int>(AncestorTracing::kYes));
}

TEST(ProcessTree, AnotherNameIsNotTheFlushThread) {
  NamedThread other("cumemtrace-x");  // pthread names are whole: a prefix does not count
  EXPECT_EQ(GrandchildSees("wrapper"), static_cast<int>(AncestorTracing::kNo));
}

TEST(ProcessTree, AProcessThatIsGoneIsNotTracing) {
  EXPECT_EQ(AncestorOf(0x3fffffff), AncestorTracing::kUnknown);  // above any pid_max: no such process
}

}  // namespace
}  // namespace cumemtrace::preload
