# Finds every third-party dependency once; each module links only the targets it owns. A missing
# one stops the configure step with the Debian package to install (scripts/setup installs them all).

# Stops configuring: `what` is missing, `packages` provide it.
function(ktune_missing what packages)
  message(FATAL_ERROR "ktune needs ${what}: install the Debian package(s) ${packages} (scripts/setup installs every one)")
endfunction()

find_package(Threads REQUIRED)

# LLVM 19: pin the folder (a versioned find_package fails; an unpinned one may pick LLVM 14).
find_package(LLVM CONFIG QUIET PATHS /usr/lib/llvm-19/lib/cmake/llvm NO_DEFAULT_PATH)
if(NOT LLVM_FOUND)
  ktune_missing("LLVM 19" "llvm-19-dev libzstd-dev")
endif()
separate_arguments(KTUNE_LLVM_DEFINITIONS NATIVE_COMMAND ${LLVM_DEFINITIONS})

# XGBoost: its CMake config needs the 'xgboost' CLI package; find the C library directly.
find_path(XGBOOST_INCLUDE_DIR xgboost/c_api.h)
find_library(XGBOOST_LIBRARY NAMES xgboost)
if(NOT XGBOOST_INCLUDE_DIR OR NOT XGBOOST_LIBRARY)
  ktune_missing("XGBoost's C API" libxgboost-dev)
endif()
add_library(xgboost::xgboost UNKNOWN IMPORTED)
set_target_properties(xgboost::xgboost PROPERTIES
  IMPORTED_LOCATION ${XGBOOST_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${XGBOOST_INCLUDE_DIR})

# Protobuf: Debian ships no protobuf-config.cmake, so CMake's FindProtobuf module.
find_package(Protobuf QUIET)
if(NOT Protobuf_FOUND)
  ktune_missing("Protobuf" "libprotobuf-dev protobuf-compiler")
endif()
find_package(gRPC CONFIG QUIET)
if(NOT gRPC_FOUND)
  ktune_missing("gRPC" "libgrpc++-dev protobuf-compiler-grpc")
endif()
find_package(SQLite3 QUIET)
if(NOT SQLite3_FOUND)
  ktune_missing("SQLite 3" libsqlite3-dev)
endif()
# prometheus-cpp: the tuning server's metrics (its core: the registry and the text format).
foreach(dep spdlog:libspdlog-dev nlohmann_json:nlohmann-json3-dev CLI11:libcli11-dev ONNX:libonnx-dev
    prometheus-cpp:prometheus-cpp-dev)
  string(REPLACE ":" ";" dep ${dep})
  list(GET dep 0 name)
  list(GET dep 1 package)
  find_package(${name} CONFIG QUIET)
  if(NOT ${name}_FOUND)
    ktune_missing(${name} ${package})
  endif()
endforeach()
if(KTUNE_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    ktune_missing("GoogleTest (or -DKTUNE_BUILD_TESTS=OFF)" "libgtest-dev libgmock-dev")
  endif()
endif()
if(KTUNE_BUILD_BENCH)
  find_package(benchmark CONFIG QUIET)
  if(NOT benchmark_FOUND)
    ktune_missing("Google Benchmark (or -DKTUNE_BUILD_BENCH=OFF)" libbenchmark-dev)
  endif()
endif()
find_package(PkgConfig REQUIRED)
# libpqxx over libpq: the tuning log in a PostgreSQL database (`--db postgresql://...`).
pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET libpq)
if(NOT LIBPQ_FOUND)
  ktune_missing("libpq (PostgreSQL's client library)" libpq-dev)
endif()
pkg_check_modules(LIBPQXX QUIET IMPORTED_TARGET libpqxx)
if(NOT LIBPQXX_FOUND)
  ktune_missing("libpqxx (PostgreSQL's C++ client library)" libpqxx-dev)
endif()
# cpp-httplib: the tuning server's HTTP port (/metrics, /healthz, /readyz) and `ktune server
# health`, which asks it.
pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
if(NOT HTTPLIB_FOUND)
  ktune_missing("cpp-httplib (the server's metrics and health port)" libcpp-httplib-dev)
endif()
if(KTUNE_BASELINES)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
  if(NOT OPENBLAS_FOUND)
    ktune_missing("OpenBLAS (or -DKTUNE_BASELINES=OFF)" libopenblas-dev)
  endif()
  # oneDNN: Debian's dnnl-config.cmake demands OpenCL headers (a GPU runtime we never use);
  # the CPU library and its headers are all the comparisons need.
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY NAMES dnnl)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    ktune_missing("oneDNN (or -DKTUNE_BASELINES=OFF)" libdnnl-dev)
  endif()
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES
    IMPORTED_LOCATION ${DNNL_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
endif()

# Versions reported by `ktune --version`.
set(KTUNE_LLVM_VERSION ${LLVM_PACKAGE_VERSION})
set(KTUNE_GRPC_VERSION ${gRPC_VERSION})
set(KTUNE_SQLITE_VERSION ${SQLite3_VERSION})
file(STRINGS ${XGBOOST_INCLUDE_DIR}/xgboost/version_config.h _xgb_lines REGEX "#define XGBOOST_VER_")
string(REGEX MATCH "MAJOR ([0-9]+)" _m "${_xgb_lines}")
set(_xgb_major ${CMAKE_MATCH_1})
string(REGEX MATCH "MINOR ([0-9]+)" _m "${_xgb_lines}")
set(_xgb_minor ${CMAKE_MATCH_1})
string(REGEX MATCH "PATCH ([0-9]+)" _m "${_xgb_lines}")
set(KTUNE_XGBOOST_VERSION ${_xgb_major}.${_xgb_minor}.${CMAKE_MATCH_1})
