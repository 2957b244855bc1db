// `shardjit`: prewarm, inspect and maintain the kernel cache. This file only wires the
// subcommands together and turns every error into a one-line message and an exit code; the tool
// never aborts on bad input.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/cache/trusted_folder.hpp"
#include "shardjit/error.hpp"
#include "shardjit/runtime.hpp"
#include "tools/cli/commands.hpp"

namespace {

using shardjit::cli::Command;
using shardjit::cli::GlobalOptions;

void add_global_options(CLI::App& app, GlobalOptions& globals) {
  app.set_version_flag("--version", std::string("shardjit ") + shardjit::version());
  app.add_option("--cache-dir", globals.cache_dir,
                 "Kernel cache folder (overrides SHARDJIT_CACHE_DIR)");
  app.add_option("--log-level", globals.log_level,
                 "trace, debug, info, warn, error, critical or off (overrides SHARDJIT_LOG_LEVEL)");
}

// "shardjit gc" when the error came from a subcommand's arguments, else "shardjit".
std::string command_name(CLI::App& app) {
  std::string name = "shardjit";
  for (CLI::App* sub : app.get_subcommands()) name += " " + sub->get_name();
  return name;
}

void print_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), message.c_str());
}

constexpr const char* kCommandList = "prewarm, ls, verify, gc, tuning or info";

int parse_failed(CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
  const std::string command = command_name(app);
  // CLI11 only says that a subcommand is required when the word given is not one of them.
  const std::vector<std::string> unparsed = app.remaining();
  if (app.get_subcommands().empty() && !unparsed.empty()) {
    print_error(command, "unknown command '" + unparsed.front() + "'; expected " + kCommandList);
  } else if (app.get_subcommands().empty()) {
    print_error(command, std::string("no command given; expected ") + kCommandList);
  } else {
    print_error(command, std::string(error.what()) + " (see '" + command + " --help')");
  }
  return shardjit::cli::kExitUsage;
}

int exit_code_for(shardjit::ErrorCode code) {
  return code == shardjit::ErrorCode::kInvalidArgument ? shardjit::cli::kExitUsage
                                                       : shardjit::cli::kExitFailed;
}

int run_chosen(CLI::App& app, const std::vector<Command>& commands) {
  const std::string command = command_name(app);
  try {
    for (const Command& candidate : commands) {
      if (candidate.app->parsed()) return candidate.run();
    }
    print_error(command, std::string("no command given; expected ") + kCommandList);
    return shardjit::cli::kExitUsage;
  } catch (const shardjit::FolderRefused& error) {
    // A cache, template or dump folder refused by its checks: nothing was done, as with any
    // other bad input.
    print_error(command, error.what());
    return shardjit::cli::kExitUsage;
  } catch (const shardjit::Error& error) {
    print_error(command, error.what());
    return exit_code_for(error.code());
  } catch (const std::exception& error) {
    print_error(command, error.what());
    return shardjit::cli::kExitFailed;
  } catch (...) {
    print_error(command, "unexpected error of an unknown type");
    return shardjit::cli::kExitFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shardjit: build, inspect and maintain the cache of run-time compiled GPU kernels"};
  GlobalOptions globals;
  add_global_options(app, globals);
  app.require_subcommand(1);
  app.fallthrough();  // so that global options may also follow the subcommand

  std::vector<Command> commands = {
      shardjit::cli::add_prewarm_command(app, globals), shardjit::cli::add_ls_command(app, globals),
      shardjit::cli::add_verify_command(app, globals), shardjit::cli::add_gc_command(app, globals),
      shardjit::cli::add_info_command(app, globals), shardjit::cli::add_tuning_command(app, globals)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return parse_failed(app, error);
  }
  return run_chosen(app, commands);
}
