# Skinny and small GEMMs tuned by ktune against OpenBLAS on one thread (build/bench/skinny_gemm).
if(TARGET ktune_tuner_model AND TARGET ktune_rpc_runner)
  ktune_bench(skinny_gemm SOURCES ${CMAKE_CURRENT_LIST_DIR}/skinny_gemm.cc
    LIBS ktune_tuner_model ktune_rpc_runner ktune_codegen ktune_te PkgConfig::OPENBLAS)
  target_compile_definitions(skinny_gemm PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(skinny_gemm ktune-runner)
endif()
