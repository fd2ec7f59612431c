// cumem-analyze's entry point: everything is in commands/ (RunCli), so that tests run the same code.
#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return cumemtrace::analyzer::RunCli(args, stdout, stderr);
}
