// `ktune build` of a bfloat16 kernel (matmul_bf16, K odd, N not a multiple of 16) linked into a
// C program: the header types the bfloat16 arguments as uint16_t and says how to fill them; the
// program rounds float32 inputs to bfloat16 bits, packs B, fills C with NaN, calls the wrapper and
// compares C with a float32 reference of the same bfloat16 values, within the bound of the
// summation order.
#include <string>

#include "tests/deploy/build_test_util.h"

namespace ktune::tools::build_test {
namespace {

// M x N x K; the program prints "worst <ratio>" (the largest |C - reference| over its bound; NaN
// compares as failure) and "written <n>" (elements of C that are not NaN).
constexpr int kM = 5, kN = 40, kK = 9;

std::string program() {
  return "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
         "#include <string.h>\n#include \"k.h\"\n"
         "enum { M = " +
         std::to_string(kM) + ", N = " + std::to_string(kN) + ", K = " + std::to_string(kK) +
         R"(, NB = (N + 15) / 16, KB = (K + 1) / 2 };
/* float32 -> bfloat16 bits, rounded to nearest even (finite inputs), as the header says. */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t state = 12345u;
static float next_value(void) { /* uniform in [-1, 1) */
  state = state * 1664525u + 1013904223u;
  return (float)((state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}
int main(void) {
  uint16_t* a = aligned_alloc(64, 64 * ((M * K * 2 + 63) / 64));
  uint16_t* b = aligned_alloc(64, 64 * ((NB * KB * 32 * 2 + 63) / 64));
  float* c = aligned_alloc(64, 64 * ((M * N * 4 + 63) / 64));
  memset(b, 0, NB * KB * 32 * 2); /* the padding rows and columns: zeros */
  for (int i = 0; i < M * K; ++i) a[i] = to_bf16(next_value());
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) b[((j / 16 * KB + k / 2) * 16 + j % 16) * 2 + k % 2] = to_bf16(next_value());
  for (int i = 0; i < M * N; ++i) c[i] = NAN;
  if (k_run(a, b, c) != 0) return 2;
  double worst = 0;
  int written = 0;
  const double u = ldexp(1.0, -24), gamma = (K + 1) * u / (1 - (K + 1) * u);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double exact = 0, abs_sum = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)from_bf16(a[i * K + k]) *
                         (double)from_bf16(b[((j / 16 * KB + k / 2) * 16 + j % 16) * 2 + k % 2]);
        exact += p;
        abs_sum += fabs(p);
      }
      const double got = c[i * N + j];
      if (!isnan(got)) ++written;
      const double ratio = fabs(got - exact) / (gamma * abs_sum + 1e-30);
      if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
    }
  printf("worst %g\nwritten %d\n", worst, written);
  return 0;
}
)";
}

TEST(BuildBf16Cli, MatmulBf16LinksIntoCAndMatchesAFloat32Reference) {
  TempDir dir;
  const Output out = ktune_build("matmul_bf16 M=" + std::to_string(kM) +
                                     " N=" + std::to_string(kN) + " K=" + std::to_string(kK) +
                                     " --name k --untuned --runtime rt.c -o k.o --header k.h",
                                 dir.path());
  ASSERT_EQ(out.status, 0) << out.err;
  const std::string header = read_file(dir.file("k.h"));
  EXPECT_TRUE(contains(header,
                       "static inline int32_t k_run(const uint16_t* A, const uint16_t* B, "
                       "float* C)"))
      << header;
  EXPECT_TRUE(contains(header, " * bfloat16 arguments are uint16_t arrays of bfloat16 bits"))
      << header;
  const auto ran = compile_and_run(dir, program(), dir.file("k.o"), dir.file("rt.c"));
  ASSERT_TRUE(ran.has_value());
  const auto lines = lines_of(*ran);
  ASSERT_EQ(lines.size(), 2u) << *ran;
  EXPECT_EQ(lines[1], "written " + std::to_string(kM * kN));
  ASSERT_EQ(lines[0].rfind("worst ", 0), 0u) << lines[0];
  const double worst = std::stod(lines[0].substr(6));
  EXPECT_LE(worst, 1.0) << "an element differs from the float32 reference by more than the bound";
}

// Without bfloat16 arguments the header keeps its old text: no bfloat16 note.
TEST(BuildBf16Cli, Float32KernelHeaderHasNoBfloat16Note) {
  TempDir dir;
  const Output out =
      ktune_build("matmul M=8 N=16 K=8 --name k --untuned -o k.o --header k.h", dir.path());
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_FALSE(contains(read_file(dir.file("k.h")), "bfloat16")) << read_file(dir.file("k.h"));
}

}  // namespace
}  // namespace ktune::tools::build_test
