# The room each fallback config leaves for tuning: FMA peak, fallback, a random sample of the
# space, timed in one process (build/bench/fallback_headroom).
ktune_bench(fallback_headroom SOURCES ${CMAKE_CURRENT_LIST_DIR}/fallback_headroom.cc
  ${CMAKE_CURRENT_LIST_DIR}/fma_peak.cc LIBS ktune_schedule_space ktune_codegen ktune_te ktune_support)
# The peak loop must use this machine's widest vectors and fused multiply-adds.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fma_peak.cc PROPERTIES
  COMPILE_OPTIONS "-march=native;-ffp-contract=fast")
