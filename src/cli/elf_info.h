// What the CLI needs to know about a program file before running it.
#pragma once
#include <string>
#include <vector>

#include "model/result.h"

namespace whymiss::cli {

struct ElfInfo {
  bool dynamic = false;              // has a program interpreter (dynamically linked)
  std::vector<std::string> needed;   // DT_NEEDED entries
  bool exact_runtime() const;        // linked against libwhymiss-rt (built with whymiss-cc)
};

// Fails with one sentence when the file cannot be read or is not a 64-bit x86-64 ELF file.
Result<ElfInfo> inspect_elf(const std::string& path);

// The program as execvp would find it: `name` itself when it contains '/', else the first
// executable file of that name on PATH. Fails with one sentence.
Result<std::string> find_program(const std::string& name);

}  // namespace whymiss::cli
