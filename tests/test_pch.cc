// The program that builds the tests' shared precompiled header (tests/CMakeLists.txt,
// ktune_test_pch); it runs no test.
#include <gtest/gtest.h>
