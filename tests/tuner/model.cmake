# Tests of the model-based search (ktune_tuner_model). Included from tests/tuner/CMakeLists.txt,
# or from tests/cost_model/CMakeLists.txt while that one does not include it.
include_guard(GLOBAL)
if(NOT TARGET ktune_tuner_model)
  return()
endif()
ktune_test(annealing_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/annealing_test.cc
  LIBS ktune_tuner_model LABELS unit)
ktune_test(submodular_pick_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/submodular_pick_test.cc
  LIBS ktune_tuner_model LABELS unit)
ktune_test(model_based_tuner_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_based_tuner_test.cc
  LIBS ktune_tuner_model LABELS unit TIMEOUT 300)
ktune_test(xgb_tune_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/xgb_tune_test.cc
  LIBS ktune_tuner_model LABELS unit TIMEOUT 120)
# The xgb tuner end to end on the local runner.
if(TARGET ktune_local_runner)
  ktune_test(xgb_e2e_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/xgb_e2e_test.cc
    LIBS ktune_local_runner ktune_tuner_model LABELS e2e TIMEOUT 300)
  target_compile_definitions(xgb_e2e_test PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(xgb_e2e_test ktune-runner)
endif()
