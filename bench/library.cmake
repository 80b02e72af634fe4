# Tuned kernels against the libraries: matmul vs OpenBLAS, conv2d vs oneDNN, one thread each
# (build/bench/tuned_vs_library). oneDNN here uses the OpenMP runtime: OpenMP sets its threads.
if(TARGET ktune_tuner_model AND TARGET ktune_rpc_runner)
  find_package(OpenMP COMPONENTS CXX)
  ktune_bench(tuned_vs_library SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuned_vs_library.cc
    LIBS ktune_tuner_model ktune_rpc_runner ktune_codegen ktune_te PkgConfig::OPENBLAS DNNL::dnnl)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(tuned_vs_library PRIVATE OpenMP::OpenMP_CXX)
  endif()
  target_compile_definitions(tuned_vs_library PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(tuned_vs_library ktune-runner)
endif()
