# The model-based search: its own overhead per batch (build/bench/tuner_overhead) and trials to 95%
# of a recorded landscape's best for random, GA and xgb (build/bench/tuner_replay), and what the
# xgb tuner's bound on fit rows costs once a job resumes more records (build/bench/tuner_fit_cap).
if(TARGET ktune_tuner_model)
  ktune_bench(tuner_overhead SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner_overhead.cc
    LIBS ktune_tuner_model ktune_cost_model)
  ktune_bench(tuner_replay SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner_replay.cc
    LIBS ktune_tuner_model ktune_codegen)
  target_compile_definitions(tuner_replay PRIVATE KTUNE_LANDSCAPE_DIR="${CMAKE_CURRENT_LIST_DIR}/landscapes")
  ktune_bench(tuner_fit_cap SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner_fit_cap.cc
    LIBS ktune_tuner_model)
  target_compile_definitions(tuner_fit_cap PRIVATE KTUNE_LANDSCAPE_DIR="${CMAKE_CURRENT_LIST_DIR}/landscapes")
endif()
