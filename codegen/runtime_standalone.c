/* ktune_parallel_for for device programs built outside ktune (cross g++, static links): the same
 * entry as codegen/runtime.cc in plain C with pthreads, one thread per chunk. Not part of
 * ktune_codegen; a device build compiles it next to the kernel objects. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef int32_t (*ktune_parallel_body)(int64_t begin, int64_t end, void* closure);

struct ktune_chunk {
  ktune_parallel_body body;
  void* closure;
  int64_t begin, end;
  int32_t code;
};

static void* ktune_run_chunk(void* p) {
  struct ktune_chunk* c = (struct ktune_chunk*)p;
  c->code = c->begin < c->end ? c->body(c->begin, c->end, c->closure) : 0;
  return NULL;
}

int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure) {
  enum { kMaxThreads = 64 };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t n = cores < 1 ? 1 : (cores > kMaxThreads ? kMaxThreads : cores);
  if (n > extent) n = extent;
  if (n <= 1) return extent > 0 ? body(0, extent, closure) : 0;
  struct ktune_chunk chunks[kMaxThreads];
  pthread_t threads[kMaxThreads];
  int started[kMaxThreads];
  int64_t per = extent / n, extra = extent % n, begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = per + (i < extra ? 1 : 0);
    chunks[i].body = body;
    chunks[i].closure = closure;
    chunks[i].begin = begin;
    chunks[i].end = begin + len;
    chunks[i].code = 0;
    begin += len;
    started[i] = i > 0 && pthread_create(&threads[i], NULL, ktune_run_chunk, &chunks[i]) == 0;
    if (i > 0 && !started[i]) ktune_run_chunk(&chunks[i]); /* no thread: run it here */
  }
  ktune_run_chunk(&chunks[0]);
  int32_t result = chunks[0].code;
  for (int64_t i = 1; i < n; ++i) {
    if (started[i]) pthread_join(threads[i], NULL);
    if (result == 0) result = chunks[i].code;
  }
  return result;
}
