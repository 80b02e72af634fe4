# KTUNE_DEVICE_ONLY: build only ktune-device and what it links (no LLVM, XGBoost, SQLite), e.g.
# cross-built for an AArch64 board with cmake/aarch64-linux-gnu.cmake (scripts/build-device).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)

add_library(ktune_warnings INTERFACE)
target_compile_options(ktune_warnings INTERFACE -Wall -Wextra $<$<BOOL:${KTUNE_WERROR}>:-Werror>)

foreach(module support codegen rpc_runner tools)
  add_subdirectory(${module})
endforeach()
install(TARGETS ktune-device RUNTIME DESTINATION bin)
