/* The workers of a local-task device for native dispatches: a command buffer's
 * dispatches, region after region, run in one call without the GIL.
 *
 * Python prepares every dispatch (vmrt_dispatch_block_t) and hands the list to
 * vmrt_pool_run. The calling thread and the pool's threads take workgroups from
 * each dispatch's shared counter (block->next, block->grain at a time); the
 * dispatches of one region run side by side, and the next region starts once
 * every workgroup of this one has finished (IREE's barrier between regions). The
 * threads help when they get there: the caller never waits for one to wake. One
 * Python round trip per command buffer instead of one thread hand-off per
 * region: on small dispatches the hand-offs cost more than the work. */
#ifndef VMRT_POOL_H_
#define VMRT_POOL_H_

#include <stdint.h>

#include "vmrt_executable.h"

/* What stays the same between runs of a command buffer; its blocks (bindings)
 * are new each run, one per task, in a separate array. */
typedef struct vmrt_pool_task_t {
  const vmrt_library_t* library;
  uint32_t ordinal;
  uint32_t region; /* nondecreasing along the list */
} vmrt_pool_task_t;

typedef struct vmrt_pool vmrt_pool_t;

/* A pool of `participants` (at most 64): the caller of vmrt_pool_run and
 * participants - 1 threads, with `pin_workers` each pinned to one CPU the process
 * may use (thread i to the i-th, modulo their count: the caller keeps the first
 * free). NULL when out of memory or threads. */
vmrt_pool_t* vmrt_pool_create(uint32_t participants, int pin_workers);

/* Stops and joins the threads; frees local memory. */
void vmrt_pool_destroy(vmrt_pool_t* pool);

/* Runs `tasks` (with `blocks`) region by region (one run at a time per pool: a second caller
 * waits). Returns -1 when every dispatch succeeded, else the index of the first
 * task whose dispatch failed (its block says which workgroup and why); later
 * regions do not start after a failure. -2: out of memory for local memory.
 * A pool used in a process forked from its creator runs on the caller alone. */
int64_t vmrt_pool_run(vmrt_pool_t* pool, const vmrt_pool_task_t* tasks,
                      vmrt_dispatch_block_t* blocks, uint32_t count);

#endif /* VMRT_POOL_H_ */
