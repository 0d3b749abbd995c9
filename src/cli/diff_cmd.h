// `whymiss diff BEFORE AFTER`: what changed between two profiles.
#pragma once
#include <ostream>

namespace whymiss::cli {

// argv[0] is the command name. Exit status 0 when the comparison was written, 2 after one line
// "whymiss: <sentence>" on `err` when a profile cannot be read or the output cannot be written.
int diff_main(int argc, char** argv, std::ostream& out, std::ostream& err);
void diff_usage(std::ostream& out);

}  // namespace whymiss::cli
