# Benchmarks of the model-based search (owned by the cost-model work).
if(TARGET ktune_tuner_model)
  ktune_bench(tuner_overhead SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner_overhead.cc
    LIBS ktune_tuner_model ktune_cost_model)
endif()
