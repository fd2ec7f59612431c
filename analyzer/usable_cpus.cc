#include "analyzer/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cumemtrace::analyzer {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

// The process's cgroup path for controller `controller` ("" for cgroup v2's unified hierarchy), from
// /proc/self/cgroup's "ID:CONTROLLERS:PATH" lines; false when it has none.
bool CgroupPath(absl::string_view controller, std::string* path) {
  std::istringstream lines(ReadSmallFile("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const std::vector<absl::string_view> controllers = absl::StrSplit(fields[1], ',');
    const bool match = controller.empty() ? fields[1].empty()
                                          : std::find(controllers.begin(), controllers.end(), controller) !=
                                                controllers.end();
    if (!match) continue;
    *path = std::string(fields[2]);
    return true;
  }
  return false;
}

// The CPUs the process's cgroup quota allows; 0 for none or none found. A path that is not mounted where the
// process sees it (another cgroup namespace) is looked up at the hierarchy's root as well. Only the process's own
// cgroup is read: a quota set on a cgroup above it is missed, and the threads are then started as the CPU set says.
unsigned QuotaCpus() {
  std::string path;
  if (CgroupPath("", &path)) {
    for (const std::string& dir : {"/sys/fs/cgroup" + path, std::string("/sys/fs/cgroup")}) {
      const std::string text = ReadSmallFile(dir + "/cpu.max");
      if (!text.empty()) return CpusOfQuota(text);
    }
  }
  if (CgroupPath("cpu", &path)) {
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      for (const std::string& dir : {mount + path, std::string(mount)}) {
        const std::string quota = ReadSmallFile(dir + "/cpu.cfs_quota_us");
        const std::string period = ReadSmallFile(dir + "/cpu.cfs_period_us");
        if (quota.empty() || period.empty()) continue;
        return CpusOfQuota(std::string(absl::StripAsciiWhitespace(quota)) + " " +
                           std::string(absl::StripAsciiWhitespace(period)));
      }
    }
  }
  return 0;
}

}  // namespace

unsigned CpusOfQuota(absl::string_view cpu_max) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) || !absl::SimpleAtoi(fields[1], &period) ||
      quota <= 0 || period <= 0) {
    return 0;  // "max", cgroup v1's -1, or not a quota
  }
  return static_cast<unsigned>((quota + period - 1) / period);
}

unsigned UsableCpus() {
  unsigned cpus = 0;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) cpus = static_cast<unsigned>(CPU_COUNT(&mask));
  if (cpus == 0) cpus = std::thread::hardware_concurrency();  // 0 when unknown
  const unsigned quota = QuotaCpus();
  if (quota > 0 && (cpus == 0 || quota < cpus)) cpus = quota;
  return cpus > 0 ? cpus : 1;
}

}  // namespace cumemtrace::analyzer
