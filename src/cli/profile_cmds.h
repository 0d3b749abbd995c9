// `whymiss record`, `whymiss report` and `whymiss run` (record, then report).
#pragma once
#include <ostream>

namespace whymiss::cli {

// argv[0] is the command name. Exit status: 0 when the profile (and report) was written, 2 on
// bad input or when no profile could be obtained, after one line "whymiss: <sentence>" on err.
int record_main(int argc, char** argv, std::ostream& out, std::ostream& err);
int report_main(int argc, char** argv, std::ostream& out, std::ostream& err);
int run_main(int argc, char** argv, std::ostream& out, std::ostream& err);
void record_usage(std::ostream& out);
void report_usage(std::ostream& out);
void run_usage(std::ostream& out);

}  // namespace whymiss::cli
