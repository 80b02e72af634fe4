# The task scheduler against an equal split over ResNet-18's tasks, replaying recorded
# landscapes (build/bench/model_tuning).
if(TARGET ktune_tuner_scheduler AND TARGET ktune_frontend AND TARGET ktune_tuner_model)
  ktune_bench(model_tuning SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_tuning.cc
    LIBS ktune_tuner_scheduler ktune_frontend ktune_tuner_model ktune_codegen)
  target_compile_definitions(model_tuning PRIVATE KTUNE_LANDSCAPE_DIR="${CMAKE_CURRENT_LIST_DIR}/landscapes"
    KTUNE_SOURCE_DIR_PATH="${PROJECT_SOURCE_DIR}")
endif()
