/* ktune's parallel runtime: ktune_parallel_for and the pool behind it, in plain C11 and pthreads.
 * One file for every process that runs ktune's kernels: it is compiled into ktune (the tuning
 * runner times kernels on it, `ktune run` runs models on it), and `ktune build --runtime FILE`
 * writes it out for programs built outside ktune, compiled next to the kernel objects by the
 * program's own compiler (cc, a cross gcc, a static link). So a shipped kernel runs on the pool
 * it was measured on.
 *
 * The API (declared in every header `ktune build` writes, and in codegen/runtime.h):
 *
 *   int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure);
 *     What kernels call for a parallel loop: runs body over [0, extent) in contiguous chunks and
 *     returns the first non-zero code of a chunk, else 0. A call from inside a body runs
 *     serially; calls from several application threads take turns on the pool.
 *   int ktune_set_num_threads(int n);   threads of the next loops (the caller counts as one);
 *                                       returns 0, or -1 (nothing changed) when n < 1.
 *   int ktune_get_num_threads(void);    the current count; the default is the number of CPUs in
 *                                       the process's affinity mask (taskset, cgroups cpusets).
 *   int ktune_set_thread_binding(int on); 1: each worker is bound to a CPU of its own (see the pool
 *                                       below); 0: workers run on any CPU of the affinity mask.
 *                                       Applies to the running workers too; returns the previous
 *                                       setting. The default is 1, or 0 when the environment has
 *                                       KTUNE_BIND_THREADS=0 at the first loop.
 *   int ktune_set_thread_cap(int n);    caps the loops this thread starts at n threads (0: no
 *                                       cap); returns the previous cap. A model library sets it
 *                                       around a step measured faster on fewer threads (a small
 *                                       layer whose chunks cost less than waking a worker on a
 *                                       far core); per calling thread, so other threads' contexts
 *                                       keep their own. A cap of 1 runs the loop on the caller
 *                                       even with a plugged parallel-for; a larger one is a hint
 *                                       the plug does not see.
 *   void* ktune_workspace_alloc(int64_t bytes); void ktune_workspace_free(void* ptr);
 *     What kernels call for their temporaries above codegen's stack limit (see Workspaces below).
 *   void ktune_set_parallel_for(ktune_parallel_for_fn fn);
 *     Plugs the application's own parallel-for (OpenMP, TBB, its own pool): every later loop
 *     calls fn(extent, body, closure) instead of the pool. fn must call body on chunks that
 *     cover [0, extent) exactly once (any split, any threads, e.g. one call per iteration) and
 *     return 0 when every call returned 0, else a non-zero code (kernels only test for non-zero).
 *     NULL restores the built-in pool. With OpenMP:
 *       static int32_t omp_for(int64_t n, ktune_parallel_body body, void* closure) {
 *         int32_t rc = 0;
 *         #pragma omp parallel for reduction(|:rc)
 *         for (int64_t i = 0; i < n; ++i) rc |= body(i, i + 1, closure);
 *         return rc;
 *       }
 *       ktune_set_parallel_for(omp_for);
 *
 * The pool: created on the first parallel loop, its workers persist. Between loops an idle
 * worker polls for the next one for kSpinNs before it sleeps on a condition variable, and the
 * caller polls for the chunks to finish for as long before it sleeps: kernels are often called
 * back to back, and a thread creation or a futex wake-up per call costs tens of microseconds.
 * A loop is split into up to kKtuneChunksPerThread contiguous chunks per thread (chunk i is always
 * the same iterations). Each thread owns a contiguous run of them, as a static schedule would
 * give it, and claims its own in order from its own atomic word; a thread whose run is done
 * claims the rest of the others' runs. Why claimed chunks: on a machine whose other processes
 * take a worker off its CPU (a compiler, another service), a static half per thread made the
 * caller wait for the preempted half, up to a scheduler time slice (small parallel kernels timed
 * 10-100x slow while tuning, so the tuner kept serial configs); with claimed chunks the caller
 * runs what the worker has not started, and a preempted worker holds back at most one small
 * chunk. Why owned runs: the same thread then runs the same part of consecutive loops of one
 * shape, so the data a layer wrote is mostly read on the core that wrote it (MobileNetV2 at two
 * threads, with the VM's two vCPUs placed far apart: 2.53-2.76 ms against 2.75-2.84 claiming from
 * one word), and the claims of different threads touch different cache lines. A loop with one
 * thread, or extent 1, runs on the caller alone. The child of a fork() starts a pool of its own.
 *
 * Bound workers: worker k runs only on the (k+2)-th CPU of the process's affinity mask (the
 * caller, left where the application put it, takes the first by elimination); workers beyond the
 * mask's CPUs stay unbound; a loop's caller found on a bound worker's CPU is moved off it (its
 * own mask kept). Why: an idle worker sleeps, and Linux may wake a sleeper on the
 * waker's CPU when that looks idle enough; a model run after a pause (a request every 50 ms)
 * then had its worker take turns with the caller on one core: the quantized ResNet-18 at two
 * threads ran in 5.6 ms unbound against 3.0-3.4 ms bound. TVM's thread pool binds its workers
 * too (TVM_BIND_THREADS).
 *
 * Workspaces: kernels take their temporaries above codegen's stack limit (a padded input, the
 * transformed tiles of a Winograd convolution) from ktune_workspace_alloc and give them back with
 * ktune_workspace_free, as TVM's kernels call TVMBackendAllocWorkspace. Each thread keeps up to
 * kKtuneCachedBlocks released blocks and hands out the most recently released one that fits
 * (the likeliest still in cache), so a model run after
 * the first allocates nothing. With malloc and free instead, the C library returned a freed
 * multi-megabyte buffer to the system and the next run faulted its pages in again: a ResNet-18
 * whose Winograd layers allocate per call ran 1.8x slower linked into a program than in ktune. */
#if !defined(_GNU_SOURCE) && defined(__linux__)
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int32_t (*ktune_parallel_body)(int64_t begin, int64_t end, void* closure);
typedef int32_t (*ktune_parallel_for_fn)(int64_t extent, ktune_parallel_body body, void* closure);

enum { kKtuneMaxThreads = 256 }; /* threads of a loop */
enum {
  kKtuneChunksPerThread = 4
}; /* chunks per loop: at most 1024, they fit the loop word's 16 bits */
static const int64_t kSpinNs = 200000; /* 200 us */

/* The loop word: generation (one per loop) << 32 | chunks << 16 | threads. Workers wait for its
 * generation to change. Each thread's run word: generation << 32 | next unclaimed chunk of its
 * run; a compare-and-swap on it claims a chunk only of the loop the claimer saw start. */
#define KTUNE_GENERATION(w) ((w) >> 32)
#define KTUNE_CHUNKS(w) ((int64_t)(((w) >> 16) & 0xffff))
#define KTUNE_THREADS(w) ((int)((w)&0xffff))
#define KTUNE_NEXT(w) ((int64_t)((w)&0xffffffffu))

static struct {
  pthread_once_t once;
  pthread_mutex_t run_mu;    /* one loop at a time on the pool */
  pthread_mutex_t mu;        /* guards the sleeps below */
  pthread_cond_t wake, done; /* workers sleep on wake, the caller on done */
  int workers;               /* started so far; under run_mu */
  /* The loop: written under run_mu before its generation is published, read only by whoever
   * claimed one of its chunks (the caller cannot start the next loop before that chunk is done). */
  ktune_parallel_body body;
  void* closure;
  int64_t extent;
  _Alignas(64) atomic_uint_fast64_t loop; /* its own cache line: read by every waiting worker */
  struct {
    _Alignas(64) atomic_uint_fast64_t word; /* a cache line per thread: its claims stay local */
  } run[kKtuneMaxThreads];
  _Alignas(64) atomic_int done_chunks; /* of the current loop */
  atomic_int result;
  atomic_int sleepers;       /* workers waiting (or about to wait) on wake */
  atomic_int caller_waiting; /* the caller waits (or is about to wait) on done: 0 or 1 */
  atomic_int threads;        /* ktune_set_num_threads; 0 = not yet initialized */
  int cpus;                  /* in the affinity mask when the pool was initialized */
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t mask; /* the affinity mask when the pool was initialized */
#endif
  pthread_mutex_t bind_mu; /* guards handles and binding changes (taken inside run_mu) */
  atomic_int bind;         /* ktune_set_thread_binding: -1 until initialized */
  pthread_t handles[kKtuneMaxThreads];    /* the workers started, under bind_mu */
  int bound_workers;                      /* how many of handles are valid, under bind_mu */
  atomic_int bound_cpu[kKtuneMaxThreads]; /* the CPU worker k is bound to, -1 when unbound */
  _Atomic(ktune_parallel_for_fn) plug;
  uint64_t start_generation[kKtuneMaxThreads]; /* per worker: the generation it was created at */
} ktune_pool = {.once = PTHREAD_ONCE_INIT,
                .run_mu = PTHREAD_MUTEX_INITIALIZER,
                .mu = PTHREAD_MUTEX_INITIALIZER,
                .wake = PTHREAD_COND_INITIALIZER,
                .done = PTHREAD_COND_INITIALIZER,
                .bind_mu = PTHREAD_MUTEX_INITIALIZER,
                .bind = -1};

static _Thread_local int ktune_inside_loop; /* set on workers and on a caller running chunks */
static _Thread_local int ktune_thread_cap;  /* ktune_set_thread_cap: 0 = none */

static int ktune_default_threads(void) {
  long n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
  if (sched_getaffinity(0, sizeof ktune_pool.mask, &ktune_pool.mask) == 0)
    n = CPU_COUNT(&ktune_pool.mask);
#endif
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  return n > kKtuneMaxThreads ? kKtuneMaxThreads : (int)n;
}

static void ktune_init_threads(void) {
  int unset = 0;
  ktune_pool.cpus = ktune_default_threads();
  atomic_compare_exchange_strong(&ktune_pool.threads, &unset, ktune_pool.cpus);
  const char* env = getenv("KTUNE_BIND_THREADS");
  unset = -1;
  atomic_compare_exchange_strong(&ktune_pool.bind, &unset, !(env && strcmp(env, "0") == 0));
}

/* Binds worker k's thread as the setting says: to the (k+2)-th CPU of the mask, or to the whole
 * mask when unbound or beyond the mask's CPUs. Under bind_mu. pthread_setaffinity_np on the
 * created thread, not the attribute form, which musl lacks. A failure leaves the thread where it
 * was: binding is a placement hint. */
static void ktune_bind_worker(int k, pthread_t thread) {
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set = ktune_pool.mask;
  int bound = -1;
  if (atomic_load(&ktune_pool.bind) == 1 && k + 1 < ktune_pool.cpus) {
    CPU_ZERO(&set);
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && bound < 0; ++cpu)
      if (CPU_ISSET(cpu, &ktune_pool.mask) && seen++ == k + 1) bound = cpu;
    CPU_SET(bound, &set);
  }
  pthread_setaffinity_np(thread, sizeof set, &set);
  atomic_store(&ktune_pool.bound_cpu[k], bound);
#else
  (void)k;
  (void)thread;
#endif
}

/* Moves the caller of a loop of n threads off the CPUs its workers are bound to (within the
 * caller's own affinity mask, which stays as it was). After a pause the kernel often woke the
 * caller on a bound worker's CPU and took milliseconds to balance it away: MobileNetV2's first
 * run at two threads after 50 ms idle took 6.5 ms against 4.4 steady. One getcpu per loop when
 * the caller is elsewhere; two affinity calls when it is not. */
static void ktune_move_caller_off_workers(int n) {
#if defined(__linux__) && defined(CPU_COUNT)
  if (atomic_load_explicit(&ktune_pool.bind, memory_order_relaxed) != 1) return;
  const int cpu = sched_getcpu();
  int on_worker = 0;
  for (int k = 0; k + 1 < n && !on_worker; ++k)
    on_worker = atomic_load_explicit(&ktune_pool.bound_cpu[k], memory_order_relaxed) == cpu;
  if (cpu < 0 || !on_worker) return;
  cpu_set_t mine, away;
  if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) != 0) return;
  away = mine;
  for (int k = 0; k + 1 < n; ++k) {
    const int c = atomic_load_explicit(&ktune_pool.bound_cpu[k], memory_order_relaxed);
    if (c >= 0) CPU_CLR(c, &away);
  }
  /* Restricting the mask migrates the thread now; the caller's own mask then comes back. */
  if (CPU_COUNT(&away) > 0 && pthread_setaffinity_np(pthread_self(), sizeof away, &away) == 0)
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
#else
  (void)n;
#endif
}

int ktune_set_thread_binding(int on) {
  pthread_once(&ktune_pool.once, ktune_init_threads);
  pthread_mutex_lock(&ktune_pool.bind_mu);
  const int previous = atomic_exchange(&ktune_pool.bind, on ? 1 : 0);
  if (previous != (on ? 1 : 0))
    for (int k = 0; k < ktune_pool.bound_workers; ++k) ktune_bind_worker(k, ktune_pool.handles[k]);
  pthread_mutex_unlock(&ktune_pool.bind_mu);
  return previous;
}

int ktune_set_num_threads(int n) {
  if (n < 1) return -1;
  atomic_store(&ktune_pool.threads, n > kKtuneMaxThreads ? kKtuneMaxThreads : n);
  return 0;
}

int ktune_get_num_threads(void) {
  pthread_once(&ktune_pool.once, ktune_init_threads);
  return atomic_load(&ktune_pool.threads);
}

int ktune_set_thread_cap(int n) {
  const int previous = ktune_thread_cap;
  ktune_thread_cap = n < 0 ? 0 : n;
  return previous;
}

void ktune_set_parallel_for(ktune_parallel_for_fn fn) { atomic_store(&ktune_pool.plug, fn); }

/* One step of a polling loop. With more threads than CPUs a polling thread holds the CPU that
 * the thread it waits for needs: it yields it instead (as libgomp throttles its spinning). */
static void ktune_cpu_relax(void) {
  if (atomic_load_explicit(&ktune_pool.threads, memory_order_relaxed) > ktune_pool.cpus) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t ktune_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls ready(arg) for up to kSpinNs, then sleeps on cond until it holds. *waiting counts the
 * sleepers (seq_cst, then ready() is read again), so whoever makes ready() true signals cond
 * only when someone may sleep. */
static void ktune_wait(int (*ready)(int64_t), int64_t arg, pthread_cond_t* cond,
                       atomic_int* waiting) {
  int64_t deadline = 0;
  for (unsigned i = 0; !ready(arg); ++i) {
    ktune_cpu_relax();
    if ((i & 63) != 63) continue;
    const int64_t now = ktune_now_ns();
    if (deadline == 0) deadline = now + kSpinNs;
    if (now <= deadline) continue;
    pthread_mutex_lock(&ktune_pool.mu);
    atomic_fetch_add(waiting, 1);
    while (!ready(arg)) pthread_cond_wait(cond, &ktune_pool.mu);
    atomic_fetch_sub(waiting, 1);
    pthread_mutex_unlock(&ktune_pool.mu);
    return;
  }
}

static int ktune_new_loop(int64_t seen) {
  return KTUNE_GENERATION(atomic_load(&ktune_pool.loop)) != (uint64_t)seen;
}
static int ktune_all_done(int64_t chunks) { return atomic_load(&ktune_pool.done_chunks) == chunks; }

/* Participant `self` (0 the caller) claims and runs the chunks of its own run of the loop of
 * `generation`, then those left in the others' runs, then counts them done with one atomic add: a
 * shared counter bumped per chunk moved its cache line between the cores twice per chunk, which
 * cost more than a small loop's chunks themselves. */
static void ktune_work(uint64_t generation, int self) {
  const uint_fast64_t loop = atomic_load_explicit(&ktune_pool.loop, memory_order_acquire);
  if (KTUNE_GENERATION(loop) != generation) return;
  const int threads = KTUNE_THREADS(loop);
  if (self >= threads) return; /* a worker left from a larger thread count sits this loop out */
  const int64_t chunks = KTUNE_CHUNKS(loop);
  int ran = 0;
  for (int i = 0; i < threads; ++i) {
    const int owner = (self + i) % threads;
    const int64_t first = owner * chunks / threads;
    const int64_t count = (owner + 1) * chunks / threads - first;
    atomic_uint_fast64_t* word = &ktune_pool.run[owner].word;
    uint_fast64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
      if (KTUNE_GENERATION(w) != generation || KTUNE_NEXT(w) >= count) break;
      if (!atomic_compare_exchange_weak_explicit(word, &w, w + 1, memory_order_acq_rel,
                                                 memory_order_acquire))
        continue; /* w now holds the current word */
      /* The loop's fields are read only under a claim of it: the caller cannot start another. */
      const int64_t c = first + KTUNE_NEXT(w);
      const int64_t per = ktune_pool.extent / chunks, extra = ktune_pool.extent % chunks;
      const int64_t begin = c * per + (c < extra ? c : extra);
      const int64_t end = begin + per + (c < extra ? 1 : 0);
      const int32_t code = begin < end ? ktune_pool.body(begin, end, ktune_pool.closure) : 0;
      int zero = 0;
      if (code != 0) atomic_compare_exchange_strong(&ktune_pool.result, &zero, code);
      ++ran;
      w = atomic_load_explicit(word, memory_order_acquire);
    }
  }
  /* The last chunks done wake the caller if it went to sleep (seq_cst on both sides). */
  if (ran > 0 && atomic_fetch_add(&ktune_pool.done_chunks, ran) + ran == chunks &&
      atomic_load(&ktune_pool.caller_waiting)) {
    pthread_mutex_lock(&ktune_pool.mu);
    pthread_cond_signal(&ktune_pool.done);
    pthread_mutex_unlock(&ktune_pool.mu);
  }
}

static void* ktune_worker(void* arg) {
  /* Not the current generation: the caller may have started a loop before this thread runs. */
  uint64_t seen = ktune_pool.start_generation[(intptr_t)arg];
  ktune_inside_loop = 1;
  for (;;) {
    ktune_wait(ktune_new_loop, (int64_t)seen, &ktune_pool.wake, &ktune_pool.sleepers);
    seen = KTUNE_GENERATION(atomic_load_explicit(&ktune_pool.loop, memory_order_acquire));
    /* Worker k is participant k + 1 (the caller is 0). */
    ktune_work(seen, (int)(intptr_t)arg + 1);
  }
  return NULL;
}

/* In the child of a fork() only the forking thread exists: the pool starts over there. (A fork
 * from inside a parallel loop body is not supported.) */
static void ktune_after_fork_child(void) {
  pthread_mutex_init(&ktune_pool.run_mu, NULL);
  pthread_mutex_init(&ktune_pool.mu, NULL);
  pthread_cond_init(&ktune_pool.wake, NULL);
  pthread_cond_init(&ktune_pool.done, NULL);
  ktune_pool.workers = 0;
  pthread_mutex_init(&ktune_pool.bind_mu, NULL);
  ktune_pool.bound_workers = 0;
  atomic_store(&ktune_pool.sleepers, 0);
  atomic_store(&ktune_pool.caller_waiting, 0);
  ktune_inside_loop = 0;
}

static void ktune_register_fork_handler(void) {
  pthread_atfork(NULL, NULL, ktune_after_fork_child);
}

/* Starts workers until there are n (or thread creation fails); called under run_mu. */
static void ktune_ensure_workers(int n) {
  static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
  pthread_once(&fork_handler, ktune_register_fork_handler);
  while (ktune_pool.workers < n) {
    pthread_attr_t attr;
    pthread_t thread;
    ktune_pool.start_generation[ktune_pool.workers] =
        KTUNE_GENERATION(atomic_load(&ktune_pool.loop));
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Started, bound and recorded under one lock, so a concurrent ktune_set_thread_binding sees
     * every worker with the setting it was bound with. */
    pthread_mutex_lock(&ktune_pool.bind_mu);
    ok = ok &&
         pthread_create(&thread, &attr, ktune_worker, (void*)(intptr_t)ktune_pool.workers) == 0;
    if (ok) {
      ktune_bind_worker(ktune_pool.workers, thread);
      ktune_pool.handles[ktune_pool.bound_workers++] = thread;
    }
    pthread_mutex_unlock(&ktune_pool.bind_mu);
    pthread_attr_destroy(&attr);
    if (!ok) return; /* fewer threads: the loop runs in fewer chunks */
    ++ktune_pool.workers;
  }
}

static int32_t ktune_serial(int64_t extent, ktune_parallel_body body, void* closure) {
  return extent > 0 ? body(0, extent, closure) : 0;
}

int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure) {
  if (ktune_thread_cap == 1) return ktune_serial(extent, body, closure);
  const ktune_parallel_for_fn plug = atomic_load(&ktune_pool.plug);
  if (plug) return plug(extent, body, closure);
  if (extent <= 0) return 0;
  int64_t n = ktune_get_num_threads();
  if (ktune_thread_cap > 0 && n > ktune_thread_cap) n = ktune_thread_cap;
  if (n > extent) n = extent;
  if (n <= 1 || ktune_inside_loop) return ktune_serial(extent, body, closure);

  pthread_mutex_lock(&ktune_pool.run_mu);
  ktune_ensure_workers((int)n - 1);
  if (n > ktune_pool.workers + 1) n = ktune_pool.workers + 1;
  if (n <= 1) {
    pthread_mutex_unlock(&ktune_pool.run_mu);
    return ktune_serial(extent, body, closure);
  }
  ktune_move_caller_off_workers((int)n);
  const int64_t chunks = n * kKtuneChunksPerThread < extent ? n * kKtuneChunksPerThread : extent;
  ktune_pool.body = body;
  ktune_pool.closure = closure;
  ktune_pool.extent = extent;
  atomic_store(&ktune_pool.result, 0);
  atomic_store(&ktune_pool.done_chunks, 0);
  const uint64_t generation = (KTUNE_GENERATION(atomic_load(&ktune_pool.loop)) + 1) & 0xffffffffu;
  for (int64_t p = 0; p < n; ++p)
    atomic_store_explicit(&ktune_pool.run[p].word, generation << 32, memory_order_relaxed);
  /* seq_cst: publishes the loop (and the run words above), then reads sleepers (a worker counts
   * itself, then re-reads). */
  atomic_store(&ktune_pool.loop, generation << 32 | (uint64_t)chunks << 16 | (uint64_t)n);
  if (atomic_load(&ktune_pool.sleepers) > 0) {
    pthread_mutex_lock(&ktune_pool.mu);
    pthread_cond_broadcast(&ktune_pool.wake);
    pthread_mutex_unlock(&ktune_pool.mu);
  }
  ktune_inside_loop = 1;
  ktune_work(generation, 0);
  ktune_inside_loop = 0;

  /* Every chunk is claimed; wait for those that workers still run. */
  ktune_wait(ktune_all_done, chunks, &ktune_pool.done, &ktune_pool.caller_waiting);
  const int32_t result = atomic_load(&ktune_pool.result);
  pthread_mutex_unlock(&ktune_pool.run_mu);
  return result;
}

enum { kKtuneCachedBlocks = 8 }; /* released blocks kept per thread */
enum { kKtuneBlockHeader = 64 }; /* the block's size sits before it, keeping 64-byte alignment */

static _Thread_local struct {
  char* base; /* what aligned_alloc returned */
  int64_t bytes;
} ktune_cached[kKtuneCachedBlocks];
static _Thread_local int ktune_ncached;
static pthread_once_t ktune_cache_once = PTHREAD_ONCE_INIT;
static pthread_key_t ktune_cache_key; /* its destructor frees an exiting thread's blocks */

static void ktune_free_cached(void* unused) {
  (void)unused;
  while (ktune_ncached > 0) free(ktune_cached[--ktune_ncached].base);
}
static void ktune_make_cache_key(void) { pthread_key_create(&ktune_cache_key, ktune_free_cached); }

void* ktune_workspace_alloc(int64_t bytes) {
  if (bytes < 1) bytes = 1;
  /* The most recently released block that fits: its lines are the likeliest still in cache. */
  int found = -1;
  for (int i = ktune_ncached - 1; i >= 0 && found < 0; --i)
    if (ktune_cached[i].bytes >= bytes) found = i;
  char* base;
  if (found >= 0) {
    base = ktune_cached[found].base;
    for (int i = found; i + 1 < ktune_ncached; ++i) ktune_cached[i] = ktune_cached[i + 1];
    --ktune_ncached;
  } else {
    const int64_t rounded = (bytes + 63) / 64 * 64;
    base = (char*)aligned_alloc(64, (size_t)(rounded + kKtuneBlockHeader));
    if (!base) return NULL;
    *(int64_t*)base = rounded;
  }
  return base + kKtuneBlockHeader;
}

void ktune_workspace_free(void* ptr) {
  if (!ptr) return;
  char* base = (char*)ptr - kKtuneBlockHeader;
  if (ktune_ncached == kKtuneCachedBlocks) {
    /* Full: the smallest block makes room (a larger one serves more requests), order kept. */
    int smallest = 0;
    for (int i = 1; i < ktune_ncached; ++i)
      if (ktune_cached[i].bytes < ktune_cached[smallest].bytes) smallest = i;
    if (ktune_cached[smallest].bytes > *(int64_t*)base) {
      free(base);
      return;
    }
    free(ktune_cached[smallest].base);
    for (int i = smallest; i + 1 < ktune_ncached; ++i) ktune_cached[i] = ktune_cached[i + 1];
    --ktune_ncached;
  }
  if (ktune_ncached == 0) {
    /* A thread's first cached block: its exit (pthread key destructor) frees the cache. */
    pthread_once(&ktune_cache_once, ktune_make_cache_key);
    pthread_setspecific(ktune_cache_key, &ktune_ncached);
  }
  ktune_cached[ktune_ncached].base = base;
  ktune_cached[ktune_ncached].bytes = *(int64_t*)base;
  ++ktune_ncached;
}
