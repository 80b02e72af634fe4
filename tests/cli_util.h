// Defines the helpers that end-to-end tests use to run the `ktune` binary (or any command) and read
// its output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#ifndef KTUNE_BINARY
#error "tests using tests/cli_util.h need KTUNE_BINARY (the path of the ktune executable)"
#endif

namespace ktune::testing_cli {

// What one run of ktune gave: its exit status (-1 when it did not exit normally, e.g. a
// crash, or could not be started) and what it printed.
struct Output {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr (empty unless asked for)
};

// Single-quotes `s` for /bin/sh (an embedded ' becomes '\'').
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace detail {

inline std::string read_file_and_remove(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  std::remove(path.c_str());
  return text;
}

}  // namespace detail

// Runs `cmd` through /bin/sh. Returns the exit status and stdout; stderr is discarded unless
// `with_stderr`, in which case it is captured separately into Output::err (through a
// temporary file).
inline Output shell(const std::string& cmd, bool with_stderr = true) {
  Output out;
  std::string err_path;
  if (with_stderr) {
    char tmpl[] = "/tmp/ktune_cli_stderr_XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd < 0) return out;
    ::close(fd);
    err_path = tmpl;
  }
  const std::string line = cmd + " 2>" + (with_stderr ? quote(err_path) : std::string("/dev/null"));
  FILE* pipe = ::popen(line.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.out.append(buf, n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (with_stderr) out.err = detail::read_file_and_remove(err_path);
  return out;
}

// Runs `KTUNE_BINARY args` (so `args` must be shell-quoted, see quote()); as shell().
inline Output ktune(const std::string& args, bool with_stderr = false) {
  return shell(std::string(KTUNE_BINARY) + " " + args, with_stderr);
}

// Returns the number of '\n' in `text`.
inline size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Bad input's contract: exit status 1 and one line on stderr that contains `text`.
inline void expect_one_line_error(const Output& r, const std::string& text) {
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
}

}  // namespace ktune::testing_cli
