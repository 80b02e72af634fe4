# Whole models against ONNX Runtime (build/bench/model_vs_ort): ktune builds each model, links it
# into a C program and races it with npm's onnxruntime-node, which scripts/setup installs in build/ort.
if(TARGET ktune)
  ktune_bench(model_vs_ort SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_vs_ort.cc LIBS nlohmann_json::nlohmann_json spdlog::spdlog)
  target_compile_definitions(model_vs_ort PRIVATE KTUNE_BIN="$<TARGET_FILE:ktune>" KTUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KTUNE_ORT_DIR="${PROJECT_BINARY_DIR}/ort")
  add_dependencies(model_vs_ort ktune)
endif()
