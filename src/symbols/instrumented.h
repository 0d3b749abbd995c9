// Whether a module (the program, a shared library) was built with whymiss-cc: its code then calls
// the TSan ABI (`__tsan_read4`, `__tsan_func_entry`, ...) that whymiss's runtime implements, so
// its memory accesses reach the simulator. Read from the file's symbol tables (.dynsym, .symtab)
// at report time, post-mortem.
#pragma once
#include <string>

namespace whymiss::symbols {

enum class Instrumentation {
  Instrumented,     // refers to (imports) TSan ABI entry points
  NotInstrumented,  // a readable ELF file that does not
  WhymissRuntime,   // defines them: whymiss's own runtime library (its time is whymiss's overhead)
  Unreadable,       // the file is gone or not ELF: nobody can tell
};

Instrumentation module_instrumentation(const std::string& path);

}  // namespace whymiss::symbols
