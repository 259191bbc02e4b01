/* Native CPU executables (llvm-cpu): IREE's executable library ABI (version
 * 0.6, runtime/src/iree/hal/local/executable_library.h) as vmrt uses it, the
 * library query, its environment, and the workgroup loop run without the GIL. */
#ifndef VMRT_EXECUTABLE_H_
#define VMRT_EXECUTABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "vmrt_elf.h"

#define VMRT_LIBRARY_VERSION 0x00000006u
#define VMRT_MAX_CONSTANT_COUNT 64
#define VMRT_MAX_BINDING_COUNT 64
#define VMRT_LOCAL_MEMORY_PAGE_SIZE 4096

/* --- the library ABI (field order and widths fixed by upstream) ---------- */
typedef struct vmrt_lib_header_t {
  uint32_t version;
  const char* name;
  uint32_t features;
  int32_t sanitizer;
} vmrt_lib_header_t;

typedef int (*vmrt_import_fn_t)(void* params, void* context, void* reserved);
typedef int (*vmrt_import_thunk_t)(vmrt_import_fn_t fn, void* params, void* context,
                                   void* reserved);

typedef struct vmrt_lib_environment_t {
  const uint32_t* constants;
  vmrt_import_thunk_t import_thunk;
  const vmrt_import_fn_t* import_funcs;
  const void** import_contexts;
  uint64_t processor[8];
} vmrt_lib_environment_t;

typedef struct vmrt_lib_dispatch_state_t {
  uint32_t workgroup_size_x;
  uint32_t workgroup_size_y;
  uint16_t workgroup_size_z;
  uint16_t constant_count;
  uint32_t workgroup_count_x;
  uint32_t workgroup_count_y;
  uint16_t workgroup_count_z;
  uint8_t max_concurrency;
  uint8_t binding_count;
  const uint32_t* constants;
  void* const* binding_ptrs;
  const size_t* binding_lengths;
} vmrt_lib_dispatch_state_t;

typedef struct vmrt_lib_workgroup_state_t {
  uint32_t workgroup_id_x;
  uint32_t workgroup_id_y;
  uint16_t workgroup_id_z;
  uint16_t reserved;
  uint32_t processor_id;
  void* local_memory;
  uint32_t local_memory_size;
} vmrt_lib_workgroup_state_t;

typedef int (*vmrt_lib_dispatch_fn_t)(const vmrt_lib_environment_t* environment,
                                      const vmrt_lib_dispatch_state_t* dispatch_state,
                                      const vmrt_lib_workgroup_state_t* workgroup_state);

typedef struct vmrt_lib_dispatch_attrs_t {
  uint64_t flags;
  uint16_t local_memory_pages;
  uint8_t constant_count;
  uint8_t binding_count;
  uint32_t workgroup_size_x;
  uint32_t workgroup_size_y;
  uint16_t workgroup_size_z;
  uint16_t parameter_count;
  uint64_t reserved_1[5];
} vmrt_lib_dispatch_attrs_t;

typedef struct vmrt_lib_v0_t {
  const vmrt_lib_header_t* header;
  struct {
    uint32_t count;
    const char* const* symbols;
  } imports;
  struct {
    uint32_t count;
    const vmrt_lib_dispatch_fn_t* ptrs;
    const vmrt_lib_dispatch_attrs_t* attrs;
    const void* params;
    const void* occupancy;
    const char* const* names;
    const char* const* tags;
    const char* const* parameter_names;
    const void* source_locations;
    const void* stage_locations;
  } exports;
  struct {
    uint32_t count;
  } constants;
  struct {
    uint32_t count;
    const void* files;
  } sources;
} vmrt_lib_v0_t;

typedef const vmrt_lib_header_t** (*vmrt_lib_query_fn_t)(uint32_t max_version,
                                                         const vmrt_lib_environment_t* env);

/* --- what vmrt exposes ---------------------------------------------------- */

/* What Python reads of one export, copied out of the library (checked). */
typedef struct vmrt_export_info_t {
  const char* name;
  uint32_t local_memory_size;
  uint32_t constant_count;
  uint32_t binding_count;
  uint32_t workgroup_size[3];
  uint64_t flags;
} vmrt_export_info_t;

/* One dispatch as Python prepares it, in one allocation: the state the library
 * reads, the tables it points into, and what the workers running it share: the
 * next workgroup to take, whether one failed, and which, or whether Ctrl-C
 * stopped it (vmrt_ctrl_c.h: pressed since `ctrl_c_seen`, the count when it was
 * laid out or its run started). */
typedef struct vmrt_dispatch_block_t {
  vmrt_lib_dispatch_state_t state;
  uint32_t constants[VMRT_MAX_CONSTANT_COUNT];
  uintptr_t binding_addresses[VMRT_MAX_BINDING_COUNT];
  size_t binding_lengths[VMRT_MAX_BINDING_COUNT];
  uint64_t next;    /* shared workgroup counter (vmrt_library_dispatch_shared) */
  uint64_t grain;   /* workgroups taken at a time from it */
  uint64_t done;    /* workgroups finished (vmrt_library_dispatch_shared) */
  int32_t failed;   /* set once a workgroup failed: the others stop */
  int32_t result;   /* the failing workgroup's return value */
  uint64_t failed_index;
  int64_t ctrl_c_seen;
  int32_t interrupted; /* the failure is Ctrl-C's (no workgroup failed) */
} vmrt_dispatch_block_t;

/* Fills a block: workgroup size and count, constants (`constants_size` bytes, at
 * most 4 * VMRT_MAX_CONSTANT_COUNT) and the binding count; Python then writes the
 * binding addresses and lengths. Returns 0, or -1 when a count is out of range. */
int vmrt_dispatch_block_init(vmrt_dispatch_block_t* block, const uint32_t workgroup_size[3],
                             const uint32_t workgroup_count[3], uint32_t max_concurrency,
                             const char* constants, size_t constants_size,
                             uint32_t binding_count);

typedef struct vmrt_library vmrt_library_t;

/* The processor data IREE's runtime passes (cpuid bits in IREE's layout). */
void vmrt_cpu_data(uint64_t out[8]);

/* Queries a loaded library through its query function. `image` (either
 * loader's) bounds every table pointer the library returns, and its query and
 * exports must be entry points of it (vmrt_elf_is_entry). Returns 0 or an IREE
 * status code with a message. */
int vmrt_library_open(void* query_fn, vmrt_elf_module_t* image,
                      const uint32_t* constants, uint32_t constant_count,
                      vmrt_library_t** out_library, char* error, size_t error_capacity);
void vmrt_library_close(vmrt_library_t* library);
const char* vmrt_library_name(const vmrt_library_t* library);
uint32_t vmrt_library_export_count(const vmrt_library_t* library);
void vmrt_library_export_info(const vmrt_library_t* library, uint32_t ordinal,
                              vmrt_export_info_t* out_info);

/* Runs workgroups [start, stop) of the linearized range (x fastest). Returns 0,
 * or nonzero once any worker's workgroup failed (block->result, ->failed_index)
 * or Ctrl-C was pressed (block->interrupted; checked before each workgroup). */
int vmrt_library_dispatch(const vmrt_library_t* library, uint32_t ordinal,
                          vmrt_dispatch_block_t* block, uint64_t start, uint64_t stop,
                          uint32_t processor_id, void* local_memory,
                          uint32_t local_memory_size);

/* Copies `count` blocks laid out by vmrt_dispatch_block_init (their states point
 * into the copies, not the originals). */
void vmrt_dispatch_blocks_copy(vmrt_dispatch_block_t* target,
                               const vmrt_dispatch_block_t* source, uint32_t count);

/* Fills the bindings of `count` blocks from one list: each block's
 * state.binding_count addresses and lengths in turn, `total` in all. Returns 0,
 * or -1 (nothing written) when the blocks need another total. */
int vmrt_dispatch_blocks_bind(vmrt_dispatch_block_t* blocks, uint32_t count,
                              const uint64_t* addresses, const uint64_t* lengths,
                              size_t total);

/* vmrt_dispatch_blocks_bind of bindings resolved through a binding table (the
 * twin: NativePlan._bind_in_python, vmrt/hal/native_loader.py). `entries` holds
 * five values per entry (a table slot, or a direct reference's buffer): the
 * address of its allocation's storage; its offset and length as the table gives
 * them (-1: to the end of the buffer); its buffer's byte offset and length in
 * that storage. Binding k of the blocks in turn refers to entry
 * `binding_entries[k]` at offset and length `binding_ranges[2k]`, `[2k + 1]`.
 * Returns 0; -1 when the blocks need another total or an entry holds values
 * beyond +-2^61 (the twin's to resolve); k + 1 when binding k's range is out of
 * range (the blocks then partly written). */
int64_t vmrt_dispatch_blocks_bind_table(vmrt_dispatch_block_t* blocks, uint32_t count,
                                        const uint32_t* binding_entries,
                                        const int64_t* binding_ranges, size_t total,
                                        const int64_t* entries, uint32_t entry_count);

/* Runs workgroups of [0, total) taken from block->next, at most block->grain at a
 * time and fewer as they run out, until none are left: every worker of a dispatch
 * calls it, so a worker that gets a core late takes less work (IREE's task system
 * balances the same way), and the last takes are single workgroups. */
int vmrt_library_dispatch_shared(const vmrt_library_t* library, uint32_t ordinal,
                                 vmrt_dispatch_block_t* block, uint64_t total,
                                 uint32_t processor_id, void* local_memory,
                                 uint32_t local_memory_size);

/* Loads a regular shared object from memory with the system loader (through a
 * memfd) and finds the library query export. The bytes first pass vmrt's own
 * loader (vmrt_elf_load_ex with VMRT_ELF_LOAD_FOR_SYSTEM), nothing of them run;
 * what it learnt describes the system loader's copy afterwards. */
int vmrt_system_library_load(const uint8_t* data, size_t size, void** out_handle,
                             void** out_query_fn, char* error, size_t error_capacity);
/* The checked image of a loaded system library (for vmrt_library_open). */
vmrt_elf_module_t* vmrt_system_library_image(void* handle);
void vmrt_system_library_unload(void* handle);

#endif /* VMRT_EXECUTABLE_H_ */
