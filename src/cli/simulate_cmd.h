// `whymiss simulate TRACE [options]`: exact cache simulation of a text trace.
#pragma once
#include <istream>
#include <ostream>

namespace whymiss::cli {

// argv[0] is the command name ("simulate"). Returns the exit status: 0 on success; 2 on any
// error, after printing one line "whymiss: <sentence>" on `err` and nothing on `out`.
// TRACE "-" reads `in`.
int simulate_main(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err);
// Same, reading std::cin for TRACE "-".
int simulate_main(int argc, char** argv, std::ostream& out, std::ostream& err);

void simulate_usage(std::ostream& out);

}  // namespace whymiss::cli
