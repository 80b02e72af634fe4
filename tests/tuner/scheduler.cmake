# Tests of the multi-task scheduler (included from tests/tuner/CMakeLists.txt).
if(TARGET ktune_tuner_scheduler)
  ktune_test(tuner_task_scheduler_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/task_scheduler_test.cc
    LIBS ktune_tuner_scheduler LABELS unit TIMEOUT 60)
endif()
if(TARGET ktune_model_tuning)
  ktune_test(tuner_model_tuning_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_tuning_test.cc
    LIBS ktune_model_tuning LABELS unit TIMEOUT 60)
  target_compile_definitions(tuner_model_tuning_test PRIVATE KTUNE_SOURCE_DIR_PATH="${PROJECT_SOURCE_DIR}")
endif()
