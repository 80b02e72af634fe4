// Declares write_files_atomically(): several output files written all-or-nothing (temp file +
// rename).
#pragma once

#include <string>
#include <vector>

namespace ktune::deploy {

struct OutputFile {
  std::string path;
  std::string contents;  // bytes, written as is
};

// Writes every file to a temporary file in its destination directory (flushed to disk), then
// renames each over its path, so no path ever holds a partial file. When any temporary file
// cannot be written, nothing is renamed and every temporary file is removed: the paths keep what
// they had. When a rename fails (rare: the path is a directory, the disk was unmounted), the files
// this call already put in place are removed too; what they replaced is not restored.
// Files get mode 0666 minus the umask. Not thread-safe: it reads the umask by setting it.
// Throws Error(kInvalidArgument) for an empty path or two paths naming the same file,
// Error(kIo) naming the path and the system's reason when a file cannot be written.
void write_files_atomically(const std::vector<OutputFile>& files);

}  // namespace ktune::deploy
