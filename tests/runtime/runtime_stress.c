/* Stress program of codegen/parallel_runtime.c (linked with it, built plainly and under
 * -fsanitize=thread): many parallel loops at 1..4 threads, from two application threads at once,
 * nested, with error codes, with a plugged parallel-for, under thread caps and in the child of a
 * fork. Every iteration
 * must run exactly once (a per-iteration hit counter, checked and reset after each loop) and every
 * loop's sum must match. Prints one line per check and "PASS"; on a failure prints "FAIL ..." and
 * exits 1.
 *
 * Usage: runtime_stress [loops]        all checks, `loops` loops each (default 10000)
 *        runtime_stress --default      prints ktune_get_num_threads() before any set
 *        runtime_stress --binding      prints the CPUs a worker may run on: as started, after
 *                                      ktune_set_thread_binding(0), after (1) again */
#define _GNU_SOURCE /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int32_t (*ktune_parallel_body)(int64_t begin, int64_t end, void* closure);
typedef int32_t (*ktune_parallel_for_fn)(int64_t extent, ktune_parallel_body body, void* closure);
int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure);
int ktune_set_num_threads(int n);
int ktune_get_num_threads(void);
void ktune_set_parallel_for(ktune_parallel_for_fn fn);
int ktune_set_thread_cap(int n);
int ktune_set_thread_binding(int on);

enum { kMaxExtent = 37 };

struct loop {
  int hits[kMaxExtent];
  int64_t weight; /* iteration i adds weight * (i + 1) */
  atomic_llong sum;
  int fail_at; /* iteration whose body returns 7; -1 = none */
  int nested;  /* each chunk runs an inner loop of extent 5 */
  atomic_int nested_bad;
  pthread_t caller;
};

static atomic_long worker_chunks; /* chunks that ran on a thread other than the loop's caller */

struct inner {
  pthread_t owner;
  atomic_int wrong_thread, iterations;
};

static int32_t inner_body(int64_t begin, int64_t end, void* closure) {
  struct inner* in = closure;
  if (!pthread_equal(pthread_self(), in->owner)) atomic_fetch_add(&in->wrong_thread, 1);
  atomic_fetch_add(&in->iterations, (int)(end - begin));
  return 0;
}

static int32_t body(int64_t begin, int64_t end, void* closure) {
  struct loop* l = closure;
  long long local = 0;
  int32_t code = 0;
  for (int64_t i = begin; i < end; ++i) {
    l->hits[i] += 1; /* not atomic: two threads on one iteration is a data race TSan reports */
    local += l->weight * (i + 1);
    if (i == l->fail_at) code = 7;
  }
  atomic_fetch_add(&l->sum, local);
  if (!pthread_equal(pthread_self(), l->caller)) atomic_fetch_add(&worker_chunks, 1);
  if (l->nested) {
    struct inner in = {.owner = pthread_self()};
    if (ktune_parallel_for(5, inner_body, &in) != 0 || atomic_load(&in.wrong_thread) != 0 ||
        atomic_load(&in.iterations) != 5)
      atomic_fetch_add(&l->nested_bad, 1);
  }
  return code;
}

/* Runs `loops` loops of extents 1..kMaxExtent; returns the number of wrong loops. */
static long run_loops(long loops, long seed) {
  long bad = 0;
  struct loop l;
  for (long n = 0; n < loops; ++n) {
    memset(&l, 0, sizeof l);
    const int extent = 1 + (int)((n + seed) % kMaxExtent);
    l.weight = n + seed;
    l.fail_at = n % 100 == 99 ? extent - 1 : -1;
    l.caller = pthread_self();
    l.nested =
        n % 50 == 7 &&
        extent >= 4; /* an outer loop of extent 1 runs alone: its inner one may use the pool */
    const int32_t rc = ktune_parallel_for(extent, body, &l);
    long long want = 0;
    int ok = rc == (l.fail_at >= 0 ? 7 : 0) && atomic_load(&l.nested_bad) == 0;
    for (int i = 0; i < extent; ++i) {
      ok = ok && l.hits[i] == 1;
      want += l.weight * (i + 1);
    }
    for (int i = extent; i < kMaxExtent; ++i) ok = ok && l.hits[i] == 0;
    if (!ok || atomic_load(&l.sum) != want) ++bad;
  }
  return bad;
}

struct app_thread {
  long loops, seed, bad;
};

static void* app_thread_main(void* p) {
  struct app_thread* a = p;
  a->bad = run_loops(a->loops, a->seed);
  return NULL;
}

static atomic_long plug_calls;

/* An application's own parallel-for: one call of body per iteration, on the calling thread. */
static int32_t serial_plug(int64_t extent, ktune_parallel_body b, void* closure) {
  atomic_fetch_add(&plug_calls, 1);
  int32_t rc = 0;
  for (int64_t i = 0; i < extent; ++i) {
    const int32_t r = b(i, i + 1, closure);
    if (rc == 0) rc = r;
  }
  return rc;
}

/* The body calls of one loop of extent 37 (one per chunk: 4 per thread), and those that ran on a
 * thread other than the loop's caller. */
static atomic_int chunk_calls, chunks_off_caller;

static int32_t count_body(int64_t begin, int64_t end, void* closure) {
  (void)begin;
  (void)end;
  atomic_fetch_add(&chunk_calls, 1);
  if (!pthread_equal(pthread_self(), *(pthread_t*)closure)) atomic_fetch_add(&chunks_off_caller, 1);
  return 0;
}

static int chunks_of_loop(void) {
  pthread_t self = pthread_self();
  atomic_store(&chunk_calls, 0);
  ktune_parallel_for(37, count_body, &self);
  return atomic_load(&chunk_calls);
}

static void* chunks_on_new_thread(void* out) {
  *(int*)out = chunks_of_loop();
  return NULL;
}

/* --binding: a loop of extent 2 at 2 threads whose chunks each wait (up to 5 s) until both are
 * running, so one of them runs on the worker; that one records the CPUs its thread may use. */
static atomic_int binding_entered;
static char worker_cpus[256];
static void cpus_of(const cpu_set_t* set, char* out, size_t size);

static int32_t binding_body(int64_t begin, int64_t end, void* closure) {
  (void)begin;
  (void)end;
  atomic_fetch_add(&binding_entered, 1);
  for (int i = 0; i < 5000 && atomic_load(&binding_entered) < 2; ++i) usleep(1000);
  if (pthread_equal(pthread_self(), *(pthread_t*)closure)) return 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  cpus_of(&set, worker_cpus, sizeof worker_cpus);
  return 0;
}

static atomic_int binding_caller_cpu;

static int32_t caller_cpu_body(int64_t begin, int64_t end, void* closure) {
  (void)end;
  if (begin == 0 && pthread_equal(pthread_self(), *(pthread_t*)closure))
    atomic_store(&binding_caller_cpu, sched_getcpu());
  return binding_body(begin, end, closure);
}

static void cpus_of(const cpu_set_t* set, char* out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int cpu = 0; cpu < CPU_SETSIZE && used + 8 < size; ++cpu)
    if (CPU_ISSET(cpu, set))
      used += (size_t)snprintf(out + used, size - used, "%s%d", used ? "," : "", cpu);
}

/* Puts the calling thread on `cpu` (by a mask of it alone), then gives it `mask`, runs a loop of
 * two threads and returns the CPU its first chunk ran on (the caller claims chunk 0 first); the
 * mask the thread has afterwards goes to `after`. */
static int caller_cpu_in_loop(int cpu, const cpu_set_t* mask, char* after, size_t size) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_t self = pthread_self();
  if (pthread_setaffinity_np(self, sizeof one, &one) != 0 ||
      pthread_setaffinity_np(self, sizeof *mask, mask) != 0)
    return -2;
  atomic_store(&binding_entered, 0);
  atomic_store(&binding_caller_cpu, -1);
  if (ktune_parallel_for(2, caller_cpu_body, &self) != 0) return -3;
  cpu_set_t now;
  if (pthread_getaffinity_np(self, sizeof now, &now) != 0) return -4;
  cpus_of(&now, after, size);
  return atomic_load(&binding_caller_cpu);
}

static const char* binding_worker_cpus(void) {
  pthread_t self = pthread_self();
  atomic_store(&binding_entered, 0);
  strcpy(worker_cpus, "none");
  if (ktune_parallel_for(2, binding_body, &self) != 0) strcpy(worker_cpus, "error");
  return worker_cpus;
}

static int print_binding(void) {
  ktune_set_num_threads(2);
  char started[256], unbound[256];
  snprintf(started, sizeof started, "%s", binding_worker_cpus());
  const int was = ktune_set_thread_binding(0);
  snprintf(unbound, sizeof unbound, "%s", binding_worker_cpus());
  const int then = ktune_set_thread_binding(1);
  printf("worker on %s; unbound on %s; bound on %s; returned %d %d\n", started, unbound,
         binding_worker_cpus(), was, then);
  /* A caller found on the worker's CPU runs the loop elsewhere in its mask, and keeps its mask;
   * a caller whose mask is that CPU alone stays. */
  cpu_set_t process, worker_only;
  if (sched_getaffinity(0, sizeof process, &process) != 0) return 1;
  CPU_ZERO(&worker_only);
  int second = -1;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && second < 0; ++cpu)
    if (CPU_ISSET(cpu, &process) && seen++ == 1) second = cpu;
  if (second < 0) return 1;
  CPU_SET(second, &worker_only);
  char after_full[256], after_one[256];
  const int moved = caller_cpu_in_loop(second, &process, after_full, sizeof after_full);
  const int stayed = caller_cpu_in_loop(second, &worker_only, after_one, sizeof after_one);
  printf("caller from %d ran on %d, mask %s; pinned there ran on %d, mask %s\n", second, moved,
         after_full, stayed, after_one);
  return 0;
}

static int failures;

static void report(const char* what, long loops, long bad) {
  printf("%s: %ld loops, %ld wrong\n", what, loops, bad);
  if (bad != 0) {
    printf("FAIL %s\n", what);
    ++failures;
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--default") == 0) {
    printf("default_threads %d\n", ktune_get_num_threads());
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--binding") == 0) return print_binding();
  const long loops = argc > 1 ? atol(argv[1]) : 10000;
  char what[64];
  for (int t = 1; t <= 4; ++t) {
    if (ktune_set_num_threads(t) != 0 || ktune_get_num_threads() != t) {
      printf("FAIL set_num_threads(%d)\n", t);
      return 1;
    }
    snprintf(what, sizeof what, "threads %d", t);
    report(what, loops, run_loops(loops, t));
  }
  if (ktune_set_num_threads(0) != -1 || ktune_get_num_threads() != 4) {
    printf("FAIL set_num_threads(0) must be refused and change nothing\n");
    return 1;
  }
  /* Two application threads share the pool (and a thread count changed meanwhile). */
  for (int t = 2; t <= 3; ++t) {
    ktune_set_num_threads(t);
    struct app_thread a[2] = {{loops, 11, 0}, {loops, 23, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; ++i)
      if (pthread_create(&th[i], NULL, app_thread_main, &a[i]) != 0) return 2;
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    snprintf(what, sizeof what, "two application threads, threads %d", t);
    report(what, 2 * loops, a[0].bad + a[1].bad);
  }
  /* A plugged parallel-for takes every loop (nested ones too); NULL gives the pool back. */
  ktune_set_num_threads(2);
  ktune_set_parallel_for(serial_plug);
  const long plug_loops = loops / 10 + 1;
  const long plug_bad = run_loops(plug_loops, 5);
  const long calls = atomic_load(&plug_calls);
  report("plugged parallel-for", plug_loops, plug_bad + (calls < plug_loops));
  printf("plugged calls %ld\n", calls);
  ktune_set_parallel_for(NULL);
  report("pool again", loops / 10 + 1, run_loops(loops / 10 + 1, 9));
  if (atomic_load(&plug_calls) != calls) {
    printf("FAIL the plug was called after it was removed\n");
    ++failures;
  }
#if !defined( \
    __SANITIZE_THREAD__) /* TSan does not support threads in a multi-threaded fork's child */
  /* The child of a fork has no workers: its pool starts over. */
  const pid_t child = fork();
  if (child == 0) _exit(run_loops(loops / 10 + 1, 3) == 0 ? 0 : 1);
  int status = 0;
  report("fork child", loops / 10 + 1,
         child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0
             ? 0
             : 1);
#else
  printf("fork child: not run under ThreadSanitizer\n");
#endif
  /* The caller may run chunks that workers have not claimed yet, but not all of them. */
  printf("chunks run by workers %ld\n", atomic_load(&worker_chunks));
  if (atomic_load(&worker_chunks) == 0) {
    printf("FAIL no chunk ran on a worker\n");
    ++failures;
  }
  /* Thread caps: per calling thread; a cap of 1 runs the loop as one call on the caller, even
   * with a plugged parallel-for. */
  ktune_set_num_threads(4);
  const int uncapped = chunks_of_loop();
  const int no_cap = ktune_set_thread_cap(2);
  const int at_two = chunks_of_loop();
  ktune_set_thread_cap(1);
  atomic_store(&chunks_off_caller, 0);
  const int at_one = chunks_of_loop();
  const int off_caller = atomic_load(&chunks_off_caller);
  int other_thread = 0;
  pthread_t other;
  if (pthread_create(&other, NULL, chunks_on_new_thread, &other_thread) == 0)
    pthread_join(other, NULL);
  const long plug_before = atomic_load(&plug_calls);
  ktune_set_parallel_for(serial_plug);
  const int plugged_at_one = chunks_of_loop();
  ktune_set_parallel_for(NULL);
  const int cap_was = ktune_set_thread_cap(no_cap);
  printf(
      "thread caps: %d chunks uncapped, %d at cap 2, %d at cap 1 (%d off the caller), %d on "
      "another thread, %d plugged at cap 1 (%ld plug calls), caps %d then %d\n",
      uncapped, at_two, at_one, off_caller, other_thread, plugged_at_one,
      atomic_load(&plug_calls) - plug_before, no_cap, cap_was);
  if (failures) return 1;
  printf("PASS\n");
  return 0;
}
