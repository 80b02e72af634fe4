// Defines test_models_dir(): the ONNX test models of scripts/make-test-models, written once per
// test process into a temporary folder.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#ifndef KTUNE_SOURCE_DIR_PATH
#error "tests using tests/frontend/test_models.h need KTUNE_SOURCE_DIR_PATH"
#endif

namespace ktune::testing_models {

// Runs the script with the system Python (Debian's python3-onnx) the first time; the folder is
// removed when the process exits. Throws std::runtime_error when the script fails.
inline const std::string& test_models_dir() {
  struct Dir {
    std::string path;
    Dir() {
      path =
          (std::filesystem::temp_directory_path() / ("ktune_models_" + std::to_string(::getpid())))
              .string();
      const std::string cmd = std::string("/usr/bin/python3 ") + KTUNE_SOURCE_DIR_PATH +
                              "/scripts/make-test-models '" + path + "' >/dev/null";
      if (std::system(cmd.c_str()) != 0)
        throw std::runtime_error("scripts/make-test-models failed: " + cmd);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

inline std::string model(const std::string& name) { return test_models_dir() + "/" + name; }

}  // namespace ktune::testing_models
