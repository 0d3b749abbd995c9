// Writing command output to files without ever leaving a half-written one behind.
#pragma once
#include <string>
#include <string_view>

#include "model/result.h"

namespace whymiss::cli {

// Fails early, before any expensive work, if `path` cannot be an output file: it is a directory,
// or its directory does not exist.
Status check_output_path(const std::string& path);

// Writes `data` to a temporary file in the directory of `path`, then renames it over `path`:
// readers see either the old file or the complete new one, and a failure leaves no file behind.
Status write_file_atomically(const std::string& path, std::string_view data);

}  // namespace whymiss::cli
