// `whymiss check`: a CI gate on a profile's cache problems.
#pragma once
#include <ostream>

namespace whymiss::cli {

// argv[0] is the command name. Exit status: 0 with nothing printed when every limit holds; 1
// with one line per violated limit on `out`; 2 after one line "whymiss: <sentence>" on `err`
// when the limits or the profile cannot be read.
int check_main(int argc, char** argv, std::ostream& out, std::ostream& err);
void check_usage(std::ostream& out);

}  // namespace whymiss::cli
