# Tests of the multi-task scheduler (included from tests/tuner/CMakeLists.txt).
if(TARGET ktune_tuner_scheduler)
  ktune_test(tuner_task_scheduler_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/task_scheduler_test.cc
    LIBS ktune_tuner_scheduler LABELS unit TIMEOUT 60)
endif()
