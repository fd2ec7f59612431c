// End-to-end test program (j): killed with SIGKILL while it holds memory, the way an OOM-killer or a scheduler ends
// a job. It makes the fixed mix of driver calls (exported symbols), creates the file "ready" in its working folder,
// and waits to be killed. Nothing at exit runs, so what reaches the trace is what the periodic flush wrote: the
// trace must hold every event (the test waits several flush intervals before the kill) and parse without a trailer.
#include <fcntl.h>
#include <unistd.h>

#include "direct_driver.h"
#include "program_support.h"

int main() {
  cumemtrace::e2e::RunDriverMix(cumemtrace::e2e::DirectDriver());
  const int ready = open("ready", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  E2E_CHECK(ready >= 0);
  close(ready);
  for (;;) pause();
}
