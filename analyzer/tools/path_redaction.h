// The rules `cumem-analyze redact` applies to paths and the command line, as pure functions so that they are tested
// on their own. The program's own tree is the directory of the script for Python programs, else of the executable:
// paths inside it become relative to it; every other path keeps only what follows site-packages/ or dist-packages/
// ("site-packages/torch/nn/modules/linear.py"), else its last component. Relative paths stay unless they climb out
// with "..". Names that are not paths ("<frozen importlib._bootstrap>", "linux-vdso.so.1") stay.
#ifndef CUMEMTRACE_ANALYZER_TOOLS_PATH_REDACTION_H_
#define CUMEMTRACE_ANALYZER_TOOLS_PATH_REDACTION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

struct ProgramTree {
  std::string dir;               // absolute, no trailing slash; "" when unknown (then every absolute path is reduced)
  bool python = false;
  size_t program_arg = 0;        // index in argv of the script (Python), else 0 (the executable)
  bool has_program_arg = false;  // false for `python -c ...`, `python -m ...`, an interactive interpreter
};

// From the header's executable and argv. `absolute_files` (e.g. Python frame files of the trace) place a script
// given by a relative path: the first of them that ends with "/" + that path is taken as the script.
ProgramTree FindProgramTree(absl::string_view executable, const std::vector<std::string>& argv,
                            const std::vector<std::string>& absolute_files);

std::string RedactPath(absl::string_view path, const ProgramTree& tree);

// argv reduced to the program's name and its own arguments (a Python interpreter's own options go), every path in
// them (also after "=" in "--flag=/path") reduced with RedactPath.
std::vector<std::string> RedactArgv(const std::vector<std::string>& argv, const ProgramTree& tree);

// Every whitespace-separated word of `text` that starts with '/' reduced (Notice messages).
std::string RedactText(absl::string_view text, const ProgramTree& tree);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_TOOLS_PATH_REDACTION_H_
