// whymiss: dispatches `whymiss <command> ...` to the command's *_main function.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/check_cmd.h"
#include "cli/diff_cmd.h"
#include "cli/profile_cmds.h"
#include "cli/simulate_cmd.h"

#ifndef WHYMISS_VERSION
#define WHYMISS_VERSION "unknown"
#endif

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv, std::ostream& out, std::ostream& err);
  void (*usage)(std::ostream& out);
};

// Add new commands here.
const Command kCommands[] = {
    {"run", "record a program and report its cache problems", whymiss::cli::run_main,
     whymiss::cli::run_usage},
    {"record", "run a program and write its cache profile", whymiss::cli::record_main,
     whymiss::cli::record_usage},
    {"report", "explain the cache misses of a recorded profile", whymiss::cli::report_main,
     whymiss::cli::report_usage},
    {"simulate", "count cache misses by kind by exactly simulating a trace",
     whymiss::cli::simulate_main, whymiss::cli::simulate_usage},
    {"check", "fail when a profile's cache problems exceed limits (a CI gate)",
     whymiss::cli::check_main, whymiss::cli::check_usage},
    {"diff", "compare two profiles: what a change fixed, improved or broke",
     whymiss::cli::diff_main, whymiss::cli::diff_usage},
};

const Command* find_command(std::string_view name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

void usage(std::ostream& out) {
  out << "usage: whymiss <command> [arguments]\n"
         "\n"
         "whymiss explains why a program's memory accesses miss in the cache.\n"
         "\n"
         "commands:\n";
  for (const Command& c : kCommands) {
    out << "  " << c.name << std::string(12 - std::string_view(c.name).size(), ' ') << c.summary
        << '\n';
  }
  out << "\n"
         "Run 'whymiss <command> --help' for a command's options; 'whymiss --version' for the\n"
         "version.\n";
}

}  // namespace

// Everything printed reaches standard output, or whymiss says it did not: a full disk or a
// closed pipe must not pass for success.
static int finish_stdout(int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed && status == 0) {
    std::cerr << "whymiss: cannot write to standard output"
              << (errno ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
    return 2;
  }
  return status;
}

int dispatch(int argc, char** argv);

int main(int argc, char** argv) { return finish_stdout(dispatch(argc, argv)); }

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    if (argc >= 3 && cmd == "help") {
      if (const Command* c = find_command(argv[2])) {
        c->usage(std::cout);
        return 0;
      }
      std::cerr << "whymiss: unknown command '" << argv[2]
                << "'; run 'whymiss --help' for the list\n";
      return 2;
    }
    usage(std::cout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::cout << "whymiss " << WHYMISS_VERSION << '\n';
    return 0;
  }
  if (const Command* c = find_command(cmd)) {
    return c->main(argc - 1, argv + 1, std::cout, std::cerr);
  }
  std::cerr << "whymiss: unknown command '" << cmd << "'; run 'whymiss --help' for the list\n";
  return 2;
}
