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
