# Tuned kernels against the libraries (OpenBLAS, oneDNN): ktune_bench_race is the shared race
# (bench/library_race.h, with baselines/ for the libraries' operators);
# build/bench/tuned_vs_library (matmul and conv2d, 1 thread; --threads N: six workloads at N)
# and build/bench/shape_zoo (shapes of real networks, 1 thread) use it, and so does skinny.cmake;
# build/bench/int8_vs_library races the int8 GEMM, convolutions and the bf16 GEMM against oneDNN
# (bench/int8_race.h, bench/int8_onednn.h).
# oneDNN here uses the OpenMP runtime: OpenMP sets its threads.
if(TARGET ktune_tuner_model AND TARGET ktune_server AND TARGET ktune_baselines)
  find_package(OpenMP COMPONENTS CXX)
  add_library(ktune_bench_race STATIC ${CMAKE_CURRENT_LIST_DIR}/library_race.cc)
  target_include_directories(ktune_bench_race PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(ktune_bench_race PUBLIC ktune_tuner_model ktune_local_runner ktune_runner_core ktune_deploy ktune_baselines ktune_codegen ktune_te
    PkgConfig::OPENBLAS DNNL::dnnl PRIVATE ktune_warnings)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(ktune_bench_race PUBLIC OpenMP::OpenMP_CXX)
  endif()
  target_compile_definitions(ktune_bench_race PRIVATE KTUNE_RUNNER_PATH="$<TARGET_FILE:ktune-runner>")
  add_dependencies(ktune_bench_race ktune-runner)

  ktune_bench(int8_vs_library SOURCES ${CMAKE_CURRENT_LIST_DIR}/int8_vs_library.cc
    ${CMAKE_CURRENT_LIST_DIR}/int8_race.cc ${CMAKE_CURRENT_LIST_DIR}/int8_onednn.cc
    ${CMAKE_CURRENT_LIST_DIR}/int8_bf16.cc ${CMAKE_CURRENT_LIST_DIR}/fma_peak.cc LIBS ktune_bench_race)
  ktune_bench(config_race SOURCES ${CMAKE_CURRENT_LIST_DIR}/config_race.cc LIBS ktune_bench_race)
  ktune_bench(tuned_vs_library SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuned_vs_library.cc
    ${CMAKE_CURRENT_LIST_DIR}/fma_peak.cc LIBS ktune_bench_race)
  ktune_bench(shape_zoo SOURCES ${CMAKE_CURRENT_LIST_DIR}/shape_zoo.cc ${CMAKE_CURRENT_LIST_DIR}/fma_peak.cc
    ${CMAKE_CURRENT_LIST_DIR}/gemv_hand.cc LIBS ktune_bench_race)
  # The hand-written GEMV ceiling is compiled as the FMA peak loop is: for this machine's vectors.
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gemv_hand.cc PROPERTIES
    COMPILE_OPTIONS "-march=native;-ffp-contract=fast")
endif()
