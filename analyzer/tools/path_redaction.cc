// Path and argv redaction. Must never keep a directory outside the program's tree, and never change a string that
// is not a path.
#include "analyzer/tools/path_redaction.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {
namespace {

absl::string_view Dirname(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return "";
  return slash == 0 ? absl::string_view("/") : path.substr(0, slash);
}

bool IsPythonInterpreter(absl::string_view path) {
  const absl::string_view base = Basename(path);
  return absl::StartsWith(base, "python") || absl::StartsWith(base, "pypy");
}

// Interpreter options that take the next argument as their value.
bool TakesValue(absl::string_view option) {
  return option == "-W" || option == "-X" || option == "--check-hash-based-pycs";
}

bool ClimbsOut(absl::string_view path) {
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return true;
  }
  return false;
}

std::string RedactArg(absl::string_view arg, const ProgramTree& tree) {
  if (arg.find('/') == absl::string_view::npos) return std::string(arg);
  const size_t eq = arg.find('=');
  if (eq != absl::string_view::npos && arg.substr(0, eq).find('/') == absl::string_view::npos) {
    return absl::StrCat(arg.substr(0, eq + 1), RedactPath(arg.substr(eq + 1), tree));
  }
  return RedactPath(arg, tree);
}

}  // namespace

ProgramTree FindProgramTree(absl::string_view executable, const std::vector<std::string>& argv,
                            const std::vector<std::string>& absolute_files) {
  ProgramTree tree;
  tree.python = IsPythonInterpreter(executable) || (!argv.empty() && IsPythonInterpreter(argv[0]));
  if (!tree.python) {
    tree.has_program_arg = !argv.empty();
    if (absl::StartsWith(executable, "/")) tree.dir = std::string(Dirname(executable));
    return tree;
  }
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "-c" || arg == "-m" || arg == "-") return tree;  // no script file
    if (arg == "--") {
      if (i + 1 < argv.size()) {
        tree.program_arg = i + 1;
        tree.has_program_arg = true;
      }
      break;
    }
    if (absl::StartsWith(arg, "-")) {
      if (TakesValue(arg)) ++i;
      continue;
    }
    tree.program_arg = i;
    tree.has_program_arg = true;
    break;
  }
  if (!tree.has_program_arg) return tree;
  const std::string& script = argv[tree.program_arg];
  if (absl::StartsWith(script, "/")) {
    tree.dir = std::string(Dirname(script));
    return tree;
  }
  absl::string_view relative = script;
  while (absl::StartsWith(relative, "./")) relative.remove_prefix(2);
  for (const std::string& file : absolute_files) {
    if (absl::StartsWith(file, "/") && absl::EndsWith(file, absl::StrCat("/", relative))) {
      const absl::string_view dir = absl::string_view(file).substr(0, file.size() - relative.size() - 1);
      tree.dir = std::string(dir.empty() ? absl::string_view("/") : dir);
      break;
    }
  }
  return tree;
}

std::string RedactPath(absl::string_view path, const ProgramTree& tree) {
  if (path.empty() || path.find('/') == absl::string_view::npos) return std::string(path);
  if (!absl::StartsWith(path, "/")) {
    return ClimbsOut(path) ? std::string(Basename(path)) : std::string(path);
  }
  if (!tree.dir.empty() && !ClimbsOut(path)) {
    if (path == tree.dir) return ".";
    const std::string prefix = tree.dir == "/" ? "/" : absl::StrCat(tree.dir, "/");
    if (absl::StartsWith(path, prefix)) return std::string(path.substr(prefix.size()));
  }
  for (absl::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = path.rfind(marker);
    if (at != absl::string_view::npos && !ClimbsOut(path.substr(at))) return std::string(path.substr(at + 1));
  }
  return std::string(Basename(path));
}

std::vector<std::string> RedactArgv(const std::vector<std::string>& argv, const ProgramTree& tree) {
  std::vector<std::string> out;
  if (argv.empty()) return out;
  out.push_back(std::string(Basename(argv[0])));
  // A Python program's own arguments start at its script; `python -m mod ...` and `-c` keep everything after the
  // interpreter, which then is the program.
  const size_t first = tree.python && tree.has_program_arg ? tree.program_arg : 1;
  for (size_t i = first; i < argv.size(); ++i) out.push_back(RedactArg(argv[i], tree));
  return out;
}

std::string RedactText(absl::string_view text, const ProgramTree& tree) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = text.find_first_of(" \t\n", i);
    const absl::string_view word = text.substr(i, end == absl::string_view::npos ? absl::string_view::npos : end - i);
    absl::StrAppend(&out, absl::StartsWith(word, "/") ? RedactPath(word, tree) : std::string(word));
    if (end == absl::string_view::npos) break;
    out.push_back(text[end]);
    i = end + 1;
  }
  return out;
}

}  // namespace cumemtrace::analyzer
