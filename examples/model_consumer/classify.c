/* Runs a model built by ktune_add_model: reads its input (raw float32, NCHW) from a file, runs
 * it on two threads, writes the output (raw float32) and prints the index of the largest value. */
#include <stdio.h>
#include <stdlib.h>

#include "net.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: classify INPUTS_FILE OUTPUTS_FILE\n");
    return 2;
  }
  /* The kernels want 64-byte aligned buffers; sizes rounded up to a multiple of 64 bytes. */
  float* input = aligned_alloc(64, (net_INPUT0_ELEMENTS * sizeof(float) + 63) / 64 * 64);
  float* output = aligned_alloc(64, (net_OUTPUT0_ELEMENTS * sizeof(float) + 63) / 64 * 64);
  FILE* f = fopen(argv[1], "rb");
  if (!input || !output || !f ||
      fread(input, sizeof(float), net_INPUT0_ELEMENTS, f) != net_INPUT0_ELEMENTS) {
    fprintf(stderr, "classify: cannot read %ld floats from %s\n", (long)net_INPUT0_ELEMENTS,
            argv[1]);
    return 1;
  }
  fclose(f);
  ktune_set_num_threads(2);
  void* ctx = net_create();
  if (!ctx) {
    fprintf(stderr, "classify: out of memory\n");
    return 1;
  }
  const int32_t status = net_run(ctx, input, output);
  net_destroy(ctx);
  if (status != 0) {
    fprintf(stderr, "classify: net_run returned %d\n", status);
    return 1;
  }
  long best = 0;
  for (long i = 1; i < net_OUTPUT0_ELEMENTS; ++i)
    if (output[i] > output[best]) best = i;
  f = fopen(argv[2], "wb");
  if (!f || fwrite(output, sizeof(float), net_OUTPUT0_ELEMENTS, f) != net_OUTPUT0_ELEMENTS)
    return 1;
  fclose(f);
  printf("class %ld\n", best);
  free(input);
  free(output);
  return 0;
}
