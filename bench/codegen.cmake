# codegen benchmarks: a hand-scheduled matmul against OpenBLAS (build/bench/matmul_hand).
ktune_bench(matmul_hand SOURCES matmul_hand.cc LIBS ktune_codegen ktune_te PkgConfig::OPENBLAS)
