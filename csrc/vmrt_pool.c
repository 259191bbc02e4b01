/* The workers of a local-task device for native dispatches (vmrt_pool.h).
 *
 * The caller of a run does all of its work if need be; the pool's threads help
 * when they get there. A run goes region by region: the caller publishes a
 * region (a range of tasks), everyone in the run takes workgroups from its
 * dispatches' shared counters, and the caller starts the next region once every
 * workgroup of this one has finished (the blocks' `done` counts), not once every
 * thread has arrived: a worker still asleep holds up nothing, which on small
 * dispatches is most of the cost (a futex wake-up takes tens of microseconds).
 *
 * A worker counts itself in `active` before it looks at a run and out when it
 * leaves; the caller closes the run (`open` = 0) and then waits for `active` to
 * drop to zero before it returns, so no worker touches a run's tasks or blocks
 * after it ended. Workers only spin while counted in: before sleeping they leave
 * the run, and rejoin when they wake. One futex word, `seq`, moves at every new
 * region (and run); waiting spins briefly first. */
#define _GNU_SOURCE
#include "vmrt_pool.h"
#include "vmrt_ctrl_c.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VMRT_POOL_MAX 64
/* Spins before sleeping: long between regions of a run (the next region follows
 * at once), short waiting for the next run (it may be long in coming, and a
 * spinning worker takes a core from the host's Python threads meanwhile). */
#define VMRT_REGION_SPINS 2000
#define VMRT_IDLE_SPINS 50
/* Spins of the caller waiting on workgroups other threads hold before it yields
 * its core (the thread holding them may be waiting for one). */
#define VMRT_YIELD_SPINS 4000
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
  int cpu; /* the CPU it is pinned to, or -1 */
} vmrt_pool_worker_t;

struct vmrt_pool {
  pthread_mutex_t run_lock; /* one run at a time */
  pid_t pid;                /* the creator's: a forked child has no threads */
  uint32_t participants;
  cpu_set_t worker_cpus; /* the CPUs workers are pinned to (none: not pinned) */
  uint32_t thread_count;
  pthread_t threads[VMRT_POOL_MAX];
  vmrt_pool_worker_t workers[VMRT_POOL_MAX];
  /* The current run: written by the caller while it is closed. */
  const vmrt_pool_task_t* tasks;
  vmrt_dispatch_block_t* blocks;
  uint32_t stop;   /* a dispatch failed: later regions do not start */
  uint64_t region; /* the current region's tasks: [low 32 bits, high 32 bits) */
  uint32_t open;   /* 1 while workers may join the run */
  uint32_t active; /* workers counted in a run */
  /* The futex word and who sleeps on it. */
  uint32_t seq;
  uint32_t sleepers;
  uint32_t shutdown;
  void* local[VMRT_POOL_MAX];
  uint32_t local_size[VMRT_POOL_MAX];
};

static void futex_wait(uint32_t* word, uint32_t expected) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

/* Spins until *word is no longer `seen`; 1 if it changed. */
static int spin_change(uint32_t* word, uint32_t seen, int spins) {
  for (int i = 0; i < spins; ++i) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seen) return 1;
    cpu_relax();
  }
  return 0;
}

/* Waits until *word is no longer `seen`. */
static void wait_change(vmrt_pool_t* pool, uint32_t* word, uint32_t seen, int spins) {
  if (spin_change(word, seen, spins)) return;
  /* Sequentially consistent with publish(): either it sees a sleeper or this
   * sees the new value (and the kernel rechecks *word before sleeping). */
  __atomic_add_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen) futex_wait(word, seen);
  __atomic_sub_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
}

/* Moves `seq`, waking sleepers when `wake` (a region with work to share). */
static void publish(vmrt_pool_t* pool, int wake) {
  __atomic_add_fetch(&pool->seq, 1, __ATOMIC_SEQ_CST);
  if (wake && __atomic_load_n(&pool->sleepers, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, &pool->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t workgroup_total(const vmrt_dispatch_block_t* b) {
  return (uint64_t)b->state.workgroup_count_x * b->state.workgroup_count_y *
         b->state.workgroup_count_z;
}

/* Participant `self` takes workgroups of tasks [low, high) until none are left. */
static void take_work(vmrt_pool_t* pool, uint32_t self, uint32_t low, uint32_t high) {
  const vmrt_pool_task_t* tasks = pool->tasks;
  vmrt_dispatch_block_t* blocks = pool->blocks;
  for (uint32_t t = low; t < high && !__atomic_load_n(&pool->stop, __ATOMIC_RELAXED); ++t) {
    if (vmrt_library_dispatch_shared(tasks[t].library, tasks[t].ordinal, &blocks[t],
                                     workgroup_total(&blocks[t]), self, pool->local[self],
                                     pool->local_size[self]))
      __atomic_store_n(&pool->stop, 1, __ATOMIC_RELAXED);
  }
}

/* A worker counted in a run: helps with region after region while the next one
 * follows within its spins; returns when the run closed or it stopped spinning. */
static void help(vmrt_pool_t* pool, uint32_t self, uint32_t* seen) {
  for (;;) {
    uint64_t region = __atomic_load_n(&pool->region, __ATOMIC_ACQUIRE);
    take_work(pool, self, (uint32_t)region, (uint32_t)(region >> 32));
    if (!spin_change(&pool->seq, *seen, VMRT_REGION_SPINS)) return;
    *seen = __atomic_load_n(&pool->seq, __ATOMIC_ACQUIRE);
    if (!__atomic_load_n(&pool->open, __ATOMIC_SEQ_CST)) return;
  }
}

/* Workers are pinned one per CPU the process may use, as IREE pins its workers to
 * its topology's cores: the i-th of those CPUs (modulo their count) for worker i,
 * so the first is left to the caller. Unpinned, a worker and the caller often
 * shared one core of a small machine while the other idled. */
static void choose_cpus(vmrt_pool_t* pool, int pin_workers) {
  cpu_set_t allowed;
  CPU_ZERO(&pool->worker_cpus);
  for (uint32_t i = 0; i < VMRT_POOL_MAX; ++i) pool->workers[i].cpu = -1;
  if (!pin_workers || sched_getaffinity(0, sizeof(allowed), &allowed)) return;
  int count = CPU_COUNT(&allowed);
  if (count < 2) return;
  int cpus[CPU_SETSIZE], found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < count; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus[found++] = cpu;
  for (uint32_t i = 1; i < pool->participants; ++i) {
    pool->workers[i].cpu = cpus[i % (uint32_t)found];
    CPU_SET(pool->workers[i].cpu, &pool->worker_cpus);
  }
}

static void* worker_main(void* arg);

/* Starts a worker thread, already pinned to its CPU (no moment unpinned). */
static int start_worker(vmrt_pool_t* pool, vmrt_pool_worker_t* worker) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr)) return -1;
  if (worker->cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(worker->cpu, &one);
    pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
  }
  int failed = pthread_create(&pool->threads[pool->thread_count], &attr, worker_main, worker);
  pthread_attr_destroy(&attr);
  return failed;
}

/* The caller steps off the workers' CPUs for a run when it is on one (the
 * scheduler put it there while the worker slept): 1 and `saved` holds its own
 * affinity, to restore after the run (it then stays where it moved). */
static int step_aside(const vmrt_pool_t* pool, cpu_set_t* saved) {
  int cpu = sched_getcpu();
  if (cpu < 0 || !CPU_ISSET(cpu, &pool->worker_cpus)) return 0;
  if (pthread_getaffinity_np(pthread_self(), sizeof(*saved), saved)) return 0;
  cpu_set_t others;
  CPU_XOR(&others, saved, &pool->worker_cpus);
  CPU_AND(&others, &others, saved);
  if (!CPU_COUNT(&others)) return 0;
  return pthread_setaffinity_np(pthread_self(), sizeof(others), &others) == 0;
}

static void* worker_main(void* arg) {
  vmrt_pool_worker_t* worker = arg;
  vmrt_pool_t* pool = worker->pool;
  uint32_t seen = 0;
  for (;;) {
    wait_change(pool, &pool->seq, seen, VMRT_IDLE_SPINS);
    seen = __atomic_load_n(&pool->seq, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&pool->shutdown, __ATOMIC_ACQUIRE)) return NULL;
    /* Counted in first, then the run checked: the caller closes it first, then
     * checks the count (sequentially consistent both): one of them sees the other. */
    __atomic_add_fetch(&pool->active, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pool->open, __ATOMIC_SEQ_CST)) help(pool, worker->index, &seen);
    __atomic_sub_fetch(&pool->active, 1, __ATOMIC_RELEASE);
  }
}

static void stop_threads(vmrt_pool_t* pool) {
  __atomic_store_n(&pool->shutdown, 1, __ATOMIC_RELEASE);
  publish(pool, 1);
  for (uint32_t i = 0; i < pool->thread_count; ++i) pthread_join(pool->threads[i], NULL);
  pool->thread_count = 0;
}

vmrt_pool_t* vmrt_pool_create(uint32_t participants, int pin_workers) {
  if (participants < 1 || participants > VMRT_POOL_MAX) return NULL;
  vmrt_pool_t* pool = calloc(1, sizeof(*pool));
  if (!pool) return NULL;
  pthread_mutex_init(&pool->run_lock, NULL);
  pool->pid = getpid();
  pool->participants = participants;
  choose_cpus(pool, pin_workers);
  /* Workers block every signal: the host's handlers run on its own threads. */
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  for (uint32_t i = 1; i < participants; ++i) {
    pool->workers[i].pool = pool;
    pool->workers[i].index = i;
    if (start_worker(pool, &pool->workers[i])) break;
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
  take_work(&solo, 0, 0, count); /* (the tasks' order is their regions') */
  free(solo.local[0]);
  return first_failure(blocks, count);
}

/* The caller waits for the workgroups of tasks [low, high) that others hold. */
static void await_region(vmrt_pool_t* pool, uint32_t low, uint32_t high) {
  int spins = 0;
  for (uint32_t t = low; t < high; ++t) {
    vmrt_dispatch_block_t* b = &pool->blocks[t];
    uint64_t total = workgroup_total(b);
    while (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) < total &&
           !__atomic_load_n(&b->failed, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&pool->stop, __ATOMIC_RELAXED)) {
      if (++spins % VMRT_YIELD_SPINS == 0) sched_yield();
      else cpu_relax();
    }
  }
}

/* The caller's side of a run with the pool (run_lock held, blocks reset). */
static void run_shared(vmrt_pool_t* pool, const vmrt_pool_task_t* tasks, uint32_t count) {
  uint32_t participants = pool->participants;
  for (uint32_t i = 0; i < count; ++i) {
    vmrt_dispatch_block_t* b = &pool->blocks[i];
    uint64_t grain = workgroup_total(b) / (4 * (uint64_t)participants);
    b->grain = grain ? grain : 1;
  }
  __atomic_store_n(&pool->open, 1, __ATOMIC_SEQ_CST);
  for (uint32_t i = 0; i < count && !__atomic_load_n(&pool->stop, __ATOMIC_RELAXED);) {
    uint32_t end = i + 1;
    uint64_t workgroups = workgroup_total(&pool->blocks[i]);
    while (end < count && tasks[end].region == tasks[i].region)
      workgroups += workgroup_total(&pool->blocks[end++]);
    __atomic_store_n(&pool->region, (uint64_t)i | ((uint64_t)end << 32), __ATOMIC_RELEASE);
    publish(pool, workgroups > 1); /* (one workgroup: the caller's alone) */
    take_work(pool, 0, i, end);
    await_region(pool, i, end);
    i = end;
  }
  /* Closed, then the count checked: a worker counted in after this sees it closed.
   * `seq` moves too, for the workers spinning in help(); sleepers need not wake. */
  __atomic_store_n(&pool->open, 0, __ATOMIC_SEQ_CST);
  publish(pool, 0);
  int spins = 0;
  while (__atomic_load_n(&pool->active, __ATOMIC_SEQ_CST)) {
    if (++spins % VMRT_YIELD_SPINS == 0) sched_yield();
    else cpu_relax();
  }
}

int64_t vmrt_pool_run(vmrt_pool_t* pool, const vmrt_pool_task_t* tasks,
                      vmrt_dispatch_block_t* blocks, uint32_t count) {
  uint32_t local;
  uint64_t widest;
  measure_tasks(tasks, blocks, count, &local, &widest);
  int64_t seen = vmrt_ctrl_c_start(); /* (Ctrl-C from here on stops the run) */
  for (uint32_t i = 0; i < count; ++i) {
    vmrt_dispatch_block_t* b = &blocks[i];
    b->next = 0;
    b->done = 0;
    b->failed = 0;
    b->interrupted = 0;
    b->ctrl_c_seen = seen;
  }
  if (!pool || pool->pid != getpid() || pool->participants == 1 || widest <= 1)
    return run_alone(tasks, blocks, count, local);
  pthread_mutex_lock(&pool->run_lock);
  /* No worker is counted in (the last run waited for that): local memory is free
   * to grow. */
  for (uint32_t p = 0; p < pool->participants; ++p) {
    if (grow_local(&pool->local[p], &pool->local_size[p], local)) {
      pthread_mutex_unlock(&pool->run_lock);
      return -2;
    }
  }
  pool->tasks = tasks;
  pool->blocks = blocks;
  pool->stop = 0;
  cpu_set_t saved;
  int stepped = step_aside(pool, &saved);
  run_shared(pool, tasks, count);
  if (stepped) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  pool->tasks = NULL;
  pool->blocks = NULL;
  pthread_mutex_unlock(&pool->run_lock);
  return first_failure(blocks, count);
}
