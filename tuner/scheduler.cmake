# Multi-task tuning (included from tuner/CMakeLists.txt): the task scheduler (no dependencies
# beyond support) and ModelTuning, which tunes a model's tasks (frontend) with TuningSessions.
add_library(ktune_tuner_scheduler
  ${CMAKE_CURRENT_LIST_DIR}/task_scheduler.cc
)
target_include_directories(ktune_tuner_scheduler PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(ktune_tuner_scheduler PUBLIC ktune_support PRIVATE $<BUILD_INTERFACE:ktune_warnings>)
if(TARGET ktune_tuner_model AND TARGET ktune_frontend)
  add_library(ktune_model_tuning ${CMAKE_CURRENT_LIST_DIR}/model_tuning.cc)
  target_include_directories(ktune_model_tuning PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(ktune_model_tuning
    PUBLIC ktune_tuner_scheduler ktune_tuner_model ktune_tuner ktune_frontend ktune_tuning_db
    PRIVATE $<BUILD_INTERFACE:ktune_warnings>)
endif()
if(TARGET ktune_model_tuning)
  # Stored in the records of the fallbacks it measures.
endif()
