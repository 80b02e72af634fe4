// Defines model(): the path of an ONNX test model of scripts/make-test-models, written on first
// request into a temporary folder of the test process; missing(): a path there without a file.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#ifndef KTUNE_SOURCE_DIR_PATH
#error "tests using tests/frontend/test_models.h need KTUNE_SOURCE_DIR_PATH"
#endif

namespace ktune::testing_models {

// The folder, removed when the process exits. The script (run with the system Python, Debian's
// python3-onnx) writes only the models asked for: a test of one small model does not wait for
// ResNet-18's quantized form. A test target that reads several models lists them in
// KTUNE_TEST_MODELS ("a.onnx,b.onnx"), written together on the first request; any other is
// written when asked for. Throws std::runtime_error when the script fails.
class TestModels {
 public:
  static TestModels& get() {
    static TestModels models;
    return models;
  }

  std::string path(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!written_.count(name)) {
#ifdef KTUNE_TEST_MODELS
      if (written_.empty()) write(KTUNE_TEST_MODELS);
#endif
      if (!written_.count(name)) write(name);
    }
    return dir_ + "/" + name;
  }

  ~TestModels() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  TestModels()
      : dir_((std::filesystem::temp_directory_path() /
              ("ktune_models_" + std::to_string(::getpid())))
                 .string()) {}

  // Writes the comma-separated models `names`.
  void write(const std::string& names) {
    const std::string cmd = std::string("/usr/bin/python3 ") + KTUNE_SOURCE_DIR_PATH +
                            "/scripts/make-test-models '" + dir_ + "' --only '" + names +
                            "' >/dev/null";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("scripts/make-test-models failed: " + cmd);
    for (size_t start = 0; start <= names.size();) {
      const size_t end = std::min(names.find(',', start), names.size());
      written_.insert(names.substr(start, end - start));
      start = end + 1;
    }
  }

  std::string dir_;
  std::mutex mu_;
  std::set<std::string> written_;
};

inline std::string model(const std::string& name) { return TestModels::get().path(name); }

// A path in the models' folder where no file is (the script refuses names it does not know).
inline std::string missing(const std::string& name) {
  return std::filesystem::path(model("not_onnx.onnx")).parent_path() / name;
}

}  // namespace ktune::testing_models
