# Tuning throughput of the local runner (bench/tune_throughput.cc).
if(TARGET ktune_rpc_runner)
  ktune_bench(tune_throughput SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_throughput.cc LIBS ktune_rpc_runner)
  target_compile_definitions(tune_throughput PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(tune_throughput ktune-runner)
endif()
