# The runtimes of shipped kernels: per-call overhead of the standalone runtime against ktune's
# in-process one and OpenMP (build/bench/runtime_overhead), and shipped kernels (`ktune build
# --runtime`, linked by cc) against their recorded speed (build/bench/shipped_vs_recorded).
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND AND TARGET ktune_codegen)
  # Both runtimes define ktune_parallel_for: the standalone one is compiled with its API renamed.
  add_library(ktune_bench_standalone_runtime OBJECT ${PROJECT_SOURCE_DIR}/codegen/runtime_standalone.c)
  set_target_properties(ktune_bench_standalone_runtime PROPERTIES C_STANDARD 11 C_EXTENSIONS OFF)
  target_compile_definitions(ktune_bench_standalone_runtime PRIVATE ktune_parallel_for=ktune_sa_parallel_for
    ktune_set_num_threads=ktune_sa_set_num_threads ktune_get_num_threads=ktune_sa_get_num_threads
    ktune_set_parallel_for=ktune_sa_set_parallel_for)
  target_link_libraries(ktune_bench_standalone_runtime PRIVATE ktune_warnings)
  ktune_bench(runtime_overhead SOURCES ${CMAKE_CURRENT_LIST_DIR}/runtime_overhead.cc
    $<TARGET_OBJECTS:ktune_bench_standalone_runtime> LIBS ktune_codegen OpenMP::OpenMP_CXX Threads::Threads)
endif()
if(TARGET ktune_tuner_model AND TARGET ktune_server AND TARGET ktune)
  ktune_bench(shipped_vs_recorded SOURCES ${CMAKE_CURRENT_LIST_DIR}/shipped_vs_recorded.cc
    LIBS ktune_tuner_model ktune_local_runner ktune_deploy ktune_tuning_db ktune_codegen nlohmann_json::nlohmann_json)
  target_compile_definitions(shipped_vs_recorded PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>"
    KTUNE_BIN="$<TARGET_FILE:ktune>")
  add_dependencies(shipped_vs_recorded ktune ktune-runner)
endif()
