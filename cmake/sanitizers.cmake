# Sanitizer builds: KTUNE_SANITIZE (ASan + UBSan, any compiler) and KTUNE_FUZZ (the libFuzzer
# targets in fuzz/, clang only; implies ASan + UBSan). Both instrument every ktune target.
# build-asan/ (`scripts/setup --asan`) sets both, so that one build serves the sanitized tests
# and the fuzz targets.
option(KTUNE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(KTUNE_FUZZ "Build the libFuzzer targets in fuzz/ (clang only; instruments all of ktune)" OFF)

if(KTUNE_SANITIZE OR KTUNE_FUZZ)
  # UBSan findings abort (so a test or the fuzzer fails on them) instead of printing and going on.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

if(KTUNE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KTUNE_FUZZ needs clang (libFuzzer): configure with CXX=clang++-19 CC=clang-19 "
                        "(scripts/setup --asan does), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Coverage for libFuzzer in every library; only the fuzz targets link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=fuzzer-no-link)
endif()
