// All-or-nothing writing of a command's output files: temp files in the destination directories,
// fsync, then rename.
#include "deploy/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "support/error.h"

namespace ktune::deploy {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, int err) {
  throw Error(ErrorKind::kIo, "cannot write " + path + ": " + std::strerror(err));
}

// Writes contents to a new temporary file next to path; returns its name. Throws Error(kIo).
std::string write_temp(const OutputFile& file, mode_t mode) {
  const fs::path dest(file.path);
  const fs::path dir = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  std::string tmpl = (dir / ("." + dest.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) fail(file.path, errno);
  const char* p = file.contents.data();
  size_t left = file.contents.size();
  int err = 0;
  while (left > 0 && err == 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
    } else {
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  // mkstemp makes the file 0600; an output file gets the permissions a plain create would.
  if (err == 0 && ::fchmod(fd, mode) != 0) err = errno;
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    std::remove(tmpl.c_str());
    fail(file.path, err);
  }
  return tmpl;
}

mode_t default_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

}  // namespace

void write_files_atomically(const std::vector<OutputFile>& files) {
  std::set<fs::path> seen;
  for (const auto& f : files) {
    if (f.path.empty()) throw Error(ErrorKind::kInvalidArgument, "an output path is empty");
    std::error_code ec;
    fs::path key = fs::weakly_canonical(fs::absolute(f.path), ec);
    if (ec) key = fs::absolute(f.path).lexically_normal();
    if (!seen.insert(key).second)
      throw Error(ErrorKind::kInvalidArgument, "two outputs are the same file: " + f.path);
  }
  const mode_t mode = default_file_mode();
  std::vector<std::string> temps;
  try {
    for (const auto& f : files) temps.push_back(write_temp(f, mode));
  } catch (...) {
    for (const auto& t : temps) std::remove(t.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (::rename(temps[i].c_str(), files[i].path.c_str()) == 0) continue;
    const int err = errno;
    for (size_t j = i; j < temps.size(); ++j) std::remove(temps[j].c_str());
    for (size_t j = 0; j < i; ++j) std::remove(files[j].path.c_str());
    fail(files[i].path, err);
  }
}

}  // namespace ktune::deploy
