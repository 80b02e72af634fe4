# codegen benchmarks: a hand-scheduled matmul against OpenBLAS (build/bench/matmul_hand).
if(KTUNE_BASELINES)
  ktune_bench(matmul_hand SOURCES matmul_hand.cc LIBS ktune_codegen ktune_te PkgConfig::OPENBLAS)
endif()
# One LLVM session for several kernels (ktune build --manifest) against one per kernel.
ktune_bench(manifest_build SOURCES manifest_build.cc LIBS ktune_codegen ktune_schedule_space ktune_te)
