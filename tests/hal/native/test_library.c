/* A native executable library written by hand against IREE's executable library
 * ABI (version 0.6), for vmrt's tests: built with the system C compiler as a
 * shared object (system-elf) or a self-contained ELF (embedded-elf). Variants
 * by macro: TEST_REQUIRED_IMPORT, TEST_OPTIONAL_IMPORT, TEST_VERSION,
 * TEST_SANITIZER, TEST_CONSTANTS. */
#include <stddef.h>
#include <stdint.h>

#ifndef TEST_VERSION
#define TEST_VERSION 6u
#endif
#ifndef TEST_SANITIZER
#define TEST_SANITIZER 0
#endif
#ifndef TEST_CONSTANTS
#define TEST_CONSTANTS 0u
#endif

typedef struct { uint32_t version; const char* name; uint32_t features; int32_t sanitizer; } header_t;
typedef struct {
  const uint32_t* constants;
  void* import_thunk;
  const void* const* import_funcs;
  const void** import_contexts;
  uint64_t processor[8];
} environment_t;
typedef struct {
  uint32_t size_x, size_y; uint16_t size_z, constant_count;
  uint32_t count_x, count_y; uint16_t count_z; uint8_t max_concurrency, binding_count;
  const uint32_t* constants; void* const* binding_ptrs; const size_t* binding_lengths;
} dispatch_state_t;
typedef struct {
  uint32_t id_x, id_y; uint16_t id_z, reserved; uint32_t processor_id;
  void* local_memory; uint32_t local_memory_size;
} workgroup_state_t;
typedef struct {
  uint64_t flags; uint16_t local_memory_pages; uint8_t constant_count, binding_count;
  uint32_t size_x, size_y; uint16_t size_z, parameter_count; uint64_t reserved[5];
} attrs_t;
typedef int (*dispatch_fn_t)(const environment_t*, const dispatch_state_t*,
                             const workgroup_state_t*);

/* out[i] = in[i] + constants[0] for the workgroup's element; refuses (7) any
 * index beyond the bindings' lengths rather than touching memory out of range. */
static int add_constant(const environment_t* env, const dispatch_state_t* d,
                        const workgroup_state_t* w) {
  uint64_t i = ((uint64_t)w->id_z * d->count_y + w->id_y) * d->count_x + w->id_x;
  if ((i + 1) * 4 > d->binding_lengths[0] || (i + 1) * 4 > d->binding_lengths[1]) return 7;
  const int32_t* in = d->binding_ptrs[0];
  int32_t* out = d->binding_ptrs[1];
  out[i] = (int32_t)((uint32_t)in[i] + d->constants[0]);
  return 0;
}

/* Returns 42 from the workgroup whose x id equals constants[0]. */
static int fail_at(const environment_t* env, const dispatch_state_t* d,
                   const workgroup_state_t* w) {
  return w->id_x == d->constants[0] ? 42 : 0;
}

/* out[i] = the sum of bytes written to and read back from local memory, and
 * the executable constant (0 when there is none); out[0] of workgroup 0 also
 * records the local memory size. */
static int use_local_memory(const environment_t* env, const dispatch_state_t* d,
                            const workgroup_state_t* w) {
  uint64_t i = w->id_x;
  if ((i + 1) * 8 > d->binding_lengths[0] || w->local_memory_size < 8192) return 9;
  uint8_t* local = w->local_memory;
  uint32_t sum = 0;
  for (uint32_t k = 0; k < 8192; ++k) local[k] = (uint8_t)(k + i);
  for (uint32_t k = 0; k < 8192; ++k) sum += local[k];
  uint32_t* out = d->binding_ptrs[0];
  out[2 * i] = sum;
  out[2 * i + 1] = TEST_CONSTANTS ? env->constants[0] : w->local_memory_size;
  return 0;
}

static const dispatch_fn_t ptrs[3] = {add_constant, fail_at, use_local_memory};
static const attrs_t attrs[3] = {
    {0, 0, 1, 2, 1, 1, 1, 0, {0}},
    {0, 0, 1, 0, 1, 1, 1, 0, {0}},
    {0, 2, 0, 1, 1, 1, 1, 0, {0}},
};
static const char* const names[3] = {"add_constant", "fail_at", "use_local_memory"};
#if defined(TEST_REQUIRED_IMPORT)
static const char* const imports[1] = {"vmrt_test_missing_fn"};
#elif defined(TEST_OPTIONAL_IMPORT)
static const char* const imports[1] = {"?vmrt_test_optional_fn"};
#endif

static const header_t header = {TEST_VERSION, "vmrt_test_library", 0, TEST_SANITIZER};
static const struct {
  const header_t* header;
  struct { uint32_t count; const char* const* symbols; } imports;
  struct {
    uint32_t count; const dispatch_fn_t* ptrs; const attrs_t* attrs; const void* params;
    const void* occupancy; const char* const* names; const char* const* tags;
    const char* const* parameter_names; const void* source_locations;
    const void* stage_locations;
  } exports;
  struct { uint32_t count; } constants;
  struct { uint32_t count; const void* files; } sources;
} library = {
    &header,
#if defined(TEST_REQUIRED_IMPORT) || defined(TEST_OPTIONAL_IMPORT)
    {1, imports},
#else
    {0, NULL},
#endif
    {3, ptrs, attrs, NULL, NULL, names, NULL, NULL, NULL, NULL},
    {TEST_CONSTANTS},
    {0, NULL},
};

const header_t** iree_hal_executable_library_query(uint32_t max_version,
                                                   const environment_t* environment) {
  return max_version >= TEST_VERSION ? (const header_t**)&library : NULL;
}
