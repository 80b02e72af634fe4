# Skinny and small GEMMs tuned by ktune against OpenBLAS on one thread (build/bench/skinny_gemm).
# ktune_bench_race comes from library.cmake (included before this file: the list is sorted).
if(TARGET ktune_bench_race)
  ktune_bench(skinny_gemm SOURCES ${CMAKE_CURRENT_LIST_DIR}/skinny_gemm.cc LIBS ktune_bench_race)
endif()
