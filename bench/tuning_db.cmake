# Benchmarks of the tuning_db module: batched insert rate and best-record latency.
if(TARGET ktune_tuning_db)
  ktune_bench(db_bench SOURCES ${CMAKE_CURRENT_LIST_DIR}/db_bench.cc LIBS ktune_tuning_db)
endif()
