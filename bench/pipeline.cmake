# Per-candidate costs of the tuning pipeline, measured with Google Benchmark.
ktune_bench(pipeline_overheads SOURCES ${CMAKE_CURRENT_LIST_DIR}/pipeline_overheads.cc
  LIBS ktune_schedule_space ktune_codegen ktune_te benchmark::benchmark)
