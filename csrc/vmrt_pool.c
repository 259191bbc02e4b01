/* The workers of a local-task device for native dispatches (vmrt_pool.h).
 *
 * Participants meet on three futex words: `generation` (a new run: workers
 * wake), `phase` (the end of a region: everyone waits for the last arrival).
 * Waiting spins briefly first: the next region usually starts within
 * microseconds, and a futex wake-up costs tens of them. */
#define _GNU_SOURCE
#include "vmrt_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VMRT_POOL_MAX 64
/* Spins before sleeping: long at a region's barrier (the next region follows at
 * once), short waiting for the next run (it may be long in coming, and a spinning
 * worker takes a core from the host's Python threads meanwhile). */
#define VMRT_BARRIER_SPINS 2000
#define VMRT_IDLE_SPINS 50
#define VMRT_LOCAL_ALIGNMENT 64

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef struct vmrt_pool_worker {
  struct vmrt_pool* pool;
  uint32_t index;
} vmrt_pool_worker_t;

struct vmrt_pool {
  pthread_mutex_t run_lock; /* one run at a time */
  pid_t pid;                /* the creator's: a forked child has no threads */
  uint32_t participants;
  uint32_t thread_count;
  pthread_t threads[VMRT_POOL_MAX];
  vmrt_pool_worker_t workers[VMRT_POOL_MAX];
  /* The current run: written by the caller before `generation` moves. */
  const vmrt_pool_task_t* tasks;
  vmrt_dispatch_block_t* blocks;
  uint32_t count;
  uint32_t run_participants;
  uint32_t stop; /* a dispatch failed: later regions do not start */
  /* Futex words and who sleeps on them. */
  uint32_t generation;
  uint32_t phase;
  uint32_t arrived;
  uint32_t sleepers;
  uint32_t shutdown;
  void* local[VMRT_POOL_MAX];
  uint32_t local_size[VMRT_POOL_MAX];
};

static void futex_wait(uint32_t* word, uint32_t expected) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

/* Waits until *word is no longer `seen`. */
static void wait_change(vmrt_pool_t* pool, uint32_t* word, uint32_t seen, int spins) {
  for (int i = 0; i < spins; ++i) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seen) return;
    cpu_relax();
  }
  /* Sequentially consistent with publish(): either it sees a sleeper or this
   * sees the new value (and the kernel rechecks *word before sleeping). */
  __atomic_add_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen) futex_wait(word, seen);
  __atomic_sub_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
}

static void publish(vmrt_pool_t* pool, uint32_t* word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&pool->sleepers, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The end of a region: the last participant to arrive lets everyone go on. */
static void barrier(vmrt_pool_t* pool, uint32_t participants, uint32_t* phase) {
  uint32_t seen = *phase;
  if (__atomic_add_fetch(&pool->arrived, 1, __ATOMIC_ACQ_REL) == participants) {
    __atomic_store_n(&pool->arrived, 0, __ATOMIC_RELAXED);
    publish(pool, &pool->phase, seen + 1);
  } else {
    wait_change(pool, &pool->phase, seen, VMRT_BARRIER_SPINS);
  }
  *phase = seen + 1;
}

static uint64_t workgroup_total(const vmrt_dispatch_block_t* b) {
  return (uint64_t)b->state.workgroup_count_x * b->state.workgroup_count_y *
         b->state.workgroup_count_z;
}

/* Participant `self`'s share of a run: every task of every region, workgroups
 * taken from the shared counters, a barrier after each region. */
static void run_share(vmrt_pool_t* pool, uint32_t self, uint32_t phase) {
  const vmrt_pool_task_t* tasks = pool->tasks;
  vmrt_dispatch_block_t* blocks = pool->blocks;
  uint32_t count = pool->count, participants = pool->run_participants;
  for (uint32_t i = 0; i < count;) {
    uint32_t end = i + 1;
    while (end < count && tasks[end].region == tasks[i].region) ++end;
    for (uint32_t t = i; t < end && !__atomic_load_n(&pool->stop, __ATOMIC_RELAXED); ++t) {
      if (vmrt_library_dispatch_shared(tasks[t].library, tasks[t].ordinal, &blocks[t],
                                       workgroup_total(&blocks[t]), self, pool->local[self],
                                       pool->local_size[self]))
        __atomic_store_n(&pool->stop, 1, __ATOMIC_RELAXED);
    }
    if (participants > 1) barrier(pool, participants, &phase);
    i = end;
  }
}

static void* worker_main(void* arg) {
  vmrt_pool_worker_t* worker = arg;
  vmrt_pool_t* pool = worker->pool;
  uint32_t seen = 0;
  for (;;) {
    wait_change(pool, &pool->generation, seen, VMRT_IDLE_SPINS);
    seen = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&pool->shutdown, __ATOMIC_ACQUIRE)) return NULL;
    run_share(pool, worker->index, __atomic_load_n(&pool->phase, __ATOMIC_ACQUIRE));
  }
}

static void stop_threads(vmrt_pool_t* pool) {
  __atomic_store_n(&pool->shutdown, 1, __ATOMIC_RELEASE);
  publish(pool, &pool->generation, pool->generation + 1);
  for (uint32_t i = 0; i < pool->thread_count; ++i) pthread_join(pool->threads[i], NULL);
  pool->thread_count = 0;
}

vmrt_pool_t* vmrt_pool_create(uint32_t participants) {
  if (participants < 1 || participants > VMRT_POOL_MAX) return NULL;
  vmrt_pool_t* pool = calloc(1, sizeof(*pool));
  if (!pool) return NULL;
  pthread_mutex_init(&pool->run_lock, NULL);
  pool->pid = getpid();
  pool->participants = participants;
  /* Workers block every signal: the host's handlers run on its own threads. */
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  for (uint32_t i = 1; i < participants; ++i) {
    pool->workers[i].pool = pool;
    pool->workers[i].index = i;
    if (pthread_create(&pool->threads[pool->thread_count], NULL, worker_main,
                       &pool->workers[i]))
      break;
    pool->thread_count++;
  }
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (pool->thread_count != participants - 1) {
    vmrt_pool_destroy(pool);
    return NULL;
  }
  return pool;
}

void vmrt_pool_destroy(vmrt_pool_t* pool) {
  if (!pool) return;
  if (pool->pid == getpid()) {
    pthread_mutex_lock(&pool->run_lock);
    stop_threads(pool);
    pthread_mutex_unlock(&pool->run_lock);
  }
  for (uint32_t i = 0; i < VMRT_POOL_MAX; ++i) free(pool->local[i]);
  pthread_mutex_destroy(&pool->run_lock);
  free(pool);
}

/* The local memory every task may use, and the most workgroups any one has. */
static void measure_tasks(const vmrt_pool_task_t* tasks, const vmrt_dispatch_block_t* blocks,
                          uint32_t count, uint32_t* local, uint64_t* widest) {
  vmrt_export_info_t info;
  *local = 0;
  *widest = 0;
  for (uint32_t i = 0; i < count; ++i) {
    vmrt_library_export_info(tasks[i].library, tasks[i].ordinal, &info);
    if (info.local_memory_size > *local) *local = info.local_memory_size;
    uint64_t total = workgroup_total(&blocks[i]);
    if (total > *widest) *widest = total;
  }
}

static int grow_local(void** memory, uint32_t* size, uint32_t needed) {
  if (*size >= needed) return 0;
  void* grown = NULL;
  if (posix_memalign(&grown, VMRT_LOCAL_ALIGNMENT, needed)) return -1;
  memset(grown, 0, needed);
  free(*memory);
  *memory = grown;
  *size = needed;
  return 0;
}

static int64_t first_failure(const vmrt_dispatch_block_t* blocks, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i)
    if (blocks[i].failed) return i;
  return -1;
}

/* A run on the calling thread alone, with local memory of its own (no pool, or
 * a pool inherited through fork, whose threads and lock are not this process's). */
static int64_t run_alone(const vmrt_pool_task_t* tasks, vmrt_dispatch_block_t* blocks,
                         uint32_t count, uint32_t local) {
  vmrt_pool_t solo;
  memset(&solo, 0, sizeof(solo));
  if (grow_local(&solo.local[0], &solo.local_size[0], local)) return -2;
  solo.tasks = tasks;
  solo.blocks = blocks;
  solo.count = count;
  solo.run_participants = 1;
  run_share(&solo, 0, 0);
  free(solo.local[0]);
  return first_failure(blocks, count);
}

int64_t vmrt_pool_run(vmrt_pool_t* pool, const vmrt_pool_task_t* tasks,
                      vmrt_dispatch_block_t* blocks, uint32_t count) {
  uint32_t local;
  uint64_t widest;
  measure_tasks(tasks, blocks, count, &local, &widest);
  for (uint32_t i = 0; i < count; ++i) {
    vmrt_dispatch_block_t* b = &blocks[i];
    b->next = 0;
    b->failed = 0;
  }
  if (!pool || pool->pid != getpid() || pool->participants == 1 || widest <= 1)
    return run_alone(tasks, blocks, count, local);
  pthread_mutex_lock(&pool->run_lock);
  /* Every worker takes part in every run, with work or without: a worker left
   * out could not tell, when it wakes late, which run it was left out of. */
  uint32_t participants = pool->participants;
  for (uint32_t p = 0; p < participants; ++p) {
    if (grow_local(&pool->local[p], &pool->local_size[p], local)) {
      pthread_mutex_unlock(&pool->run_lock);
      return -2;
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    vmrt_dispatch_block_t* b = &blocks[i];
    uint64_t grain = workgroup_total(b) / (4 * (uint64_t)participants);
    b->grain = grain ? grain : 1;
  }
  pool->tasks = tasks;
  pool->blocks = blocks;
  pool->count = count;
  pool->run_participants = participants;
  pool->stop = 0;
  uint32_t phase = __atomic_load_n(&pool->phase, __ATOMIC_ACQUIRE);
  publish(pool, &pool->generation, pool->generation + 1);
  run_share(pool, 0, phase);
  /* Every participant has passed the last barrier: none reads the tasks again. */
  pool->tasks = NULL;
  pool->blocks = NULL;
  pthread_mutex_unlock(&pool->run_lock);
  return first_failure(blocks, count);
}
