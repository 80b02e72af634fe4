# Finds every third-party dependency once; each module links only the targets it owns.
find_package(Threads REQUIRED)

# LLVM 19: pin the folder (a versioned find_package fails; an unpinned one may pick LLVM 14).
find_package(LLVM CONFIG REQUIRED PATHS /usr/lib/llvm-19/lib/cmake/llvm NO_DEFAULT_PATH)
separate_arguments(KTUNE_LLVM_DEFINITIONS NATIVE_COMMAND ${LLVM_DEFINITIONS})

# XGBoost: its CMake config needs the 'xgboost' CLI package; find the C library directly.
find_path(XGBOOST_INCLUDE_DIR xgboost/c_api.h REQUIRED)
find_library(XGBOOST_LIBRARY NAMES xgboost REQUIRED)
add_library(xgboost::xgboost UNKNOWN IMPORTED)
set_target_properties(xgboost::xgboost PROPERTIES
  IMPORTED_LOCATION ${XGBOOST_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${XGBOOST_INCLUDE_DIR})

# Protobuf: Debian ships no protobuf-config.cmake, so CMake's FindProtobuf module.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)

find_package(SQLite3 REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# oneDNN: Debian's dnnl-config.cmake demands OpenCL headers (a GPU runtime we never use);
# the CPU library and its headers are all the benchmarks need.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES
  IMPORTED_LOCATION ${DNNL_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})

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
