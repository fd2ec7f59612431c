// The table of cumem-analyze's subcommands: the one list that parsing, --help and dispatch read. A new subcommand
// is a new file in this folder defining a CommandSpec, and one line in registry.cc.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_REGISTRY_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_REGISTRY_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/commands/command.h"

namespace cumemtrace::analyzer {

// Every subcommand, in the order --help lists them.
const std::vector<const CommandSpec*>& Commands();
// The subcommand called `name`, or nullptr.
const CommandSpec* FindCommand(std::string_view name);
// The command run when none is named (summary).
const CommandSpec* DefaultCommand();

// `cumem-analyze --help`: every command with its synopsis and what it does, the options and the exit status.
std::string ToolHelp();
// `cumem-analyze COMMAND --help`: that command's usage, what it does and each option it takes.
std::string CommandHelp(const CommandSpec& command);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_REGISTRY_H_
