# Tuning throughput of the local runner (bench/tune_throughput.cc).
if(TARGET ktune_server)
  ktune_bench(tune_throughput SOURCES ${CMAKE_CURRENT_LIST_DIR}/tune_throughput.cc LIBS ktune_server ktune_client ktune_worker ktune_protocol ktune_local_runner)
  target_compile_definitions(tune_throughput PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(tune_throughput ktune-runner)
endif()

# The tuning server's CPU per trial with 1, 2 and 4 workers (bench/service_overhead.cc).
if(TARGET ktune_server)
  ktune_bench(service_overhead SOURCES ${CMAKE_CURRENT_LIST_DIR}/service_overhead.cc LIBS ktune_server ktune_client ktune_worker ktune_protocol ktune_local_runner)
  target_compile_definitions(service_overhead PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>"
    KTUNE_BIN="$<TARGET_FILE:ktune>")
  add_dependencies(service_overhead ktune ktune-runner)
endif()

# The tuning server with 10, 100 and 1000 simulated devices (bench/fleet_scale.cc).
if(TARGET ktune_server AND TARGET ktune_simulated_fleet)
  ktune_bench(fleet_scale SOURCES ${CMAKE_CURRENT_LIST_DIR}/fleet_scale.cc LIBS ktune_client ktune_simulated_fleet ktune_protocol)
  target_compile_definitions(fleet_scale PRIVATE KTUNE_BIN="$<TARGET_FILE:ktune>"
    KTUNE_LANDSCAPE_DIR="${CMAKE_CURRENT_LIST_DIR}/landscapes")
  add_dependencies(fleet_scale ktune)
endif()
