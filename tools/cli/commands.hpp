// The subcommands of the `shardjit` tool. Each add_*_command registers its options on `app` and
// returns what runs it once the command line has been parsed; main.cpp picks the one chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "tools/cli/global_options.hpp"

namespace shardjit::cli {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the work failed: a compile, a bad entry, an unusable cache
inline constexpr int kExitUsage = 2;   // bad arguments or input files, a refused folder; nothing was done

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_prewarm_command(CLI::App& app, const GlobalOptions& globals);
Command add_ls_command(CLI::App& app, const GlobalOptions& globals);
Command add_verify_command(CLI::App& app, const GlobalOptions& globals);
Command add_gc_command(CLI::App& app, const GlobalOptions& globals);
Command add_info_command(CLI::App& app, const GlobalOptions& globals);
Command add_tuning_command(CLI::App& app, const GlobalOptions& globals);

}  // namespace shardjit::cli
