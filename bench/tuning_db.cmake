# Benchmarks of the tuning_db module: batched insert rate and best-record latency.
if(TARGET ktune_tuning_db)
  ktune_bench(db_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/db_bench.cc LIBS ktune_tuning_db)
endif()
# What `ktune build` gives a shape nobody tuned: the nearest tuned workload's config against the
# fallback, timed in one runner (build/bench/nearest_shape).
if(TARGET ktune_tuner_model AND TARGET ktune_server)
  ktune_bench(nearest_shape SOURCES ${CMAKE_CURRENT_LIST_DIR}/nearest_shape.cc
    LIBS ktune_tuner_model ktune_local_runner ktune_deploy ktune_tuning_db ktune_codegen)
  target_compile_definitions(nearest_shape PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(nearest_shape ktune-runner)
endif()
