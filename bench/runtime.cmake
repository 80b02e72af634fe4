# The runtime of ktune's kernels: per-call overhead of codegen/parallel_runtime.c against OpenMP
# (build/bench/runtime_overhead), and shipped kernels (`ktune build
# --runtime`, linked by cc) against their recorded speed (build/bench/shipped_vs_recorded).
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND AND TARGET ktune_codegen)
  ktune_bench(runtime_overhead SOURCES ${CMAKE_CURRENT_LIST_DIR}/runtime_overhead.cc LIBS ktune_codegen OpenMP::OpenMP_CXX Threads::Threads)
endif()
if(TARGET ktune_tuner_model AND TARGET ktune_server AND TARGET ktune)
  ktune_bench(shipped_vs_recorded SOURCES ${CMAKE_CURRENT_LIST_DIR}/shipped_vs_recorded.cc
    LIBS ktune_tuner_model ktune_local_runner ktune_deploy ktune_tuning_db ktune_codegen nlohmann_json::nlohmann_json)
  target_compile_definitions(shipped_vs_recorded PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>"
    KTUNE_BIN="$<TARGET_FILE:ktune>")
  add_dependencies(shipped_vs_recorded ktune ktune-runner)
endif()
