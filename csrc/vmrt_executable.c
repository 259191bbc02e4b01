/* Native CPU executables: library query and checks, the environment a library
 * expects, the workgroup loop, and system-loader libraries from memory.
 * Called through cffi, which releases the GIL around every call: dispatches of
 * several workers run in parallel. */
#define _GNU_SOURCE
#include "vmrt_executable.h"
#include "vmrt_ctrl_c.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct vmrt_library {
  const vmrt_lib_v0_t* v0;
  vmrt_lib_environment_t environment;
  uint32_t* constants;
  vmrt_import_fn_t* import_funcs;
  const void** import_contexts;
  vmrt_elf_module_t* image; /* bounds every pointer the library returns */
};

static int fail(char* error, size_t capacity, int code, const char* format, ...) {
  if (error && capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, capacity, format, args);
    va_end(args);
  }
  return code;
}

/* ---- processor data (IREE's x86-64 bit layout, cpu_feature_bits.inl) ---- */
typedef struct { uint32_t eax, ebx, ecx, edx; } cpuid_regs_t;

static cpuid_regs_t cpuid_or_zero(uint32_t leaf, uint32_t subleaf) {
  cpuid_regs_t r = {0, 0, 0, 0};
  uint32_t max_leaf = __get_cpuid_max(leaf & 0x80000000u, NULL);
  if (leaf <= max_leaf) __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

#define COPY_BIT(out, out_bit, reg, reg_bit) \
  ((out) |= (((reg) >> (reg_bit)) & 1u) ? (1ull << (out_bit)) : 0ull)

static uint64_t cpu_avx512_bits(cpuid_regs_t l7, cpuid_regs_t l7_1) {
  uint64_t out = 0;
  COPY_BIT(out, 20, l7.ebx, 16); /* avx512f */
  COPY_BIT(out, 21, l7.ebx, 28); /* avx512cd */
  COPY_BIT(out, 22, l7.ebx, 31); /* avx512vl */
  COPY_BIT(out, 23, l7.ebx, 17); /* avx512dq */
  COPY_BIT(out, 24, l7.ebx, 30); /* avx512bw */
  COPY_BIT(out, 25, l7.ebx, 21); /* avx512ifma */
  COPY_BIT(out, 26, l7.ecx, 1);  /* avx512vbmi */
  COPY_BIT(out, 27, l7.ecx, 14); /* avx512vpopcntdq */
  COPY_BIT(out, 28, l7.ecx, 11); /* avx512vnni */
  COPY_BIT(out, 29, l7.ecx, 6);  /* avx512vbmi2 */
  COPY_BIT(out, 30, l7.ecx, 12); /* avx512bitalg */
  COPY_BIT(out, 31, l7_1.eax, 5); /* avx512bf16 */
  COPY_BIT(out, 32, l7.edx, 23); /* avx512fp16 */
  return out;
}

void vmrt_cpu_data(uint64_t out[8]) {
  memset(out, 0, 8 * sizeof(uint64_t));
  cpuid_regs_t l1 = cpuid_or_zero(1, 0), l7 = cpuid_or_zero(7, 0);
  cpuid_regs_t l7_1 = cpuid_or_zero(7, 1), ld = cpuid_or_zero(0xD, 0);
  cpuid_regs_t lx1 = cpuid_or_zero(0x80000001u, 0);
  uint64_t bits = 0;
  COPY_BIT(bits, 0, l1.ecx, 0);   /* sse3 */
  COPY_BIT(bits, 1, l1.ecx, 9);   /* ssse3 */
  COPY_BIT(bits, 2, l1.ecx, 19);  /* sse4.1 */
  COPY_BIT(bits, 3, l1.ecx, 20);  /* sse4.2 */
  COPY_BIT(bits, 4, lx1.ecx, 6);  /* sse4a */
  if ((ld.eax & 0x7u) == 0x7u) {  /* YMM state enabled */
    COPY_BIT(bits, 10, l1.ecx, 28); /* avx */
    COPY_BIT(bits, 11, l1.ecx, 12); /* fma */
    COPY_BIT(bits, 12, lx1.ecx, 16); /* fma4 */
    COPY_BIT(bits, 13, lx1.ecx, 11); /* xop */
    COPY_BIT(bits, 14, l1.ecx, 29); /* f16c */
    COPY_BIT(bits, 15, l7.ebx, 5);  /* avx2 */
  }
  if ((ld.eax & 0xE7u) == 0xE7u) bits |= cpu_avx512_bits(l7, l7_1); /* ZMM state */
  if ((ld.eax & 0x60000u) == 0x60000u) { /* AMX tile state */
    COPY_BIT(bits, 50, l7.edx, 24); /* amx-tile */
    COPY_BIT(bits, 51, l7.edx, 25); /* amx-int8 */
    COPY_BIT(bits, 52, l7.edx, 22); /* amx-bf16 */
  }
  out[0] = bits;
}

/* ---- checks of what the library returns --------------------------------- */

/* Whether [p, p+n) lies in one readable segment of the image. */
static int in_image(const vmrt_library_t* lib, const void* p, size_t n) {
  size_t room = p ? vmrt_elf_readable(lib->image, p) : 0;
  return room && n <= room;
}

/* Whether `s` is a NUL-terminated string inside a readable segment of the image. */
static int string_in_image(const vmrt_library_t* lib, const char* s) {
  size_t room = s ? vmrt_elf_readable(lib->image, s) : 0;
  return room && memchr(s, 0, room) != NULL;
}

static int check_exports(vmrt_library_t* lib, char* error, size_t cap) {
  const vmrt_lib_v0_t* v0 = lib->v0;
  uint32_t n = v0->exports.count;
  if (!n) return 0;
  if (!v0->exports.attrs || !in_image(lib, v0->exports.attrs, (size_t)n * sizeof(vmrt_lib_dispatch_attrs_t)))
    return fail(error, cap, 9, "executable exports must provide dispatch attributes");
  if (!v0->exports.names || !in_image(lib, v0->exports.names, (size_t)n * sizeof(char*)))
    return fail(error, cap, 9, "executable exports must provide function names");
  if (!v0->exports.ptrs || !in_image(lib, v0->exports.ptrs, (size_t)n * sizeof(void*)))
    return fail(error, cap, 9, "executable exports must provide function pointers");
  for (uint32_t i = 0; i < n; ++i) {
    const vmrt_lib_dispatch_attrs_t* attrs = &v0->exports.attrs[i];
    if (attrs->constant_count > VMRT_MAX_CONSTANT_COUNT)
      return fail(error, cap, 11, "dispatch requiring %u constants exceeds limit of %d",
                  attrs->constant_count, VMRT_MAX_CONSTANT_COUNT);
    if (attrs->binding_count > VMRT_MAX_BINDING_COUNT)
      return fail(error, cap, 11, "dispatch requiring %u bindings exceeds limit of %d",
                  attrs->binding_count, VMRT_MAX_BINDING_COUNT);
    const char* name = v0->exports.names[i];
    if (!string_in_image(lib, name) || !name[0])
      return fail(error, cap, 9, "executable export %u missing function name", i);
    if (!vmrt_elf_is_entry(lib->image, (const void*)v0->exports.ptrs[i]))
      return fail(error, cap, 3, "executable export %u is not the start of code in the "
                  "library", i);
  }
  return 0;
}

/* Imports: vmrt provides none; optional ones (`?name`) resolve to NULL. */
static int resolve_imports(vmrt_library_t* lib, char* error, size_t cap) {
  uint32_t n = lib->v0->imports.count;
  if (!n) return 0;
  const char* const* symbols = lib->v0->imports.symbols;
  if (!symbols || !in_image(lib, symbols, (size_t)n * sizeof(char*)))
    return fail(error, cap, 3, "executable import table is malformed");
  for (uint32_t i = 0; i < n; ++i) {
    if (!string_in_image(lib, symbols[i]))
      return fail(error, cap, 3, "executable import %u has no name", i);
    if (symbols[i][0] != '?')
      return fail(error, cap, 5, "executable requires import '%.200s', which vmrt cannot provide",
                  symbols[i]);
  }
  lib->import_funcs = calloc(n, sizeof(vmrt_import_fn_t));
  lib->import_contexts = calloc(n, sizeof(void*));
  if (!lib->import_funcs || !lib->import_contexts)
    return fail(error, cap, 8, "out of memory for the import table");
  lib->environment.import_funcs = lib->import_funcs;
  lib->environment.import_contexts = lib->import_contexts;
  return 0;
}

static int import_thunk(vmrt_import_fn_t fn, void* params, void* context, void* reserved) {
  return fn ? fn(params, context, reserved) : -1;
}

static int query_library(vmrt_library_t* lib, vmrt_lib_query_fn_t query, char* error,
                         size_t cap) {
  const vmrt_lib_header_t** header = query(VMRT_LIBRARY_VERSION, &lib->environment);
  if (!header)
    return fail(error, cap, 9, "executable does not support this version of the runtime "
                "(%08X) or this processor", VMRT_LIBRARY_VERSION);
  if (!in_image(lib, header, sizeof(*header)) || !in_image(lib, *header, sizeof(**header)))
    return fail(error, cap, 3, "executable library header points outside the library");
  if ((*header)->version > VMRT_LIBRARY_VERSION)
    return fail(error, cap, 9, "executable library version %08X is newer than the runtime's "
                "%08X", (*header)->version, VMRT_LIBRARY_VERSION);
  if ((*header)->sanitizer != 0)
    return fail(error, cap, 14, "executable requires sanitizer %d, which vmrt does not support",
                (*header)->sanitizer);
  if (!string_in_image(lib, (*header)->name))
    return fail(error, cap, 3, "executable library has no name");
  /* The header is the first field of the v0 library struct. */
  lib->v0 = (const vmrt_lib_v0_t*)header;
  if (!in_image(lib, lib->v0, sizeof(*lib->v0)))
    return fail(error, cap, 3, "executable library table points outside the library");
  return 0;
}

int vmrt_library_open(void* query_fn, vmrt_elf_module_t* image,
                      const uint32_t* constants, uint32_t constant_count,
                      vmrt_library_t** out_library, char* error, size_t cap) {
  *out_library = NULL;
  if (!query_fn) return fail(error, cap, 5, "executable has no library query function");
  if (!vmrt_elf_is_entry(image, query_fn))
    return fail(error, cap, 3, "the library query is not the start of code in the library");
  vmrt_library_t* lib = calloc(1, sizeof(*lib));
  if (!lib) return fail(error, cap, 8, "out of memory");
  lib->image = image;
  if (constant_count) {
    lib->constants = malloc((size_t)constant_count * sizeof(uint32_t));
    if (!lib->constants) { free(lib); return fail(error, cap, 8, "out of memory"); }
    memcpy(lib->constants, constants, (size_t)constant_count * sizeof(uint32_t));
  }
  lib->environment.constants = lib->constants;
  lib->environment.import_thunk = import_thunk;
  vmrt_cpu_data(lib->environment.processor);
  int status = query_library(lib, (vmrt_lib_query_fn_t)query_fn, error, cap);
  if (!status && lib->v0->constants.count != constant_count)
    status = fail(error, cap, 9, "executable requires %u constants but caller provided %u; "
                  "must match", lib->v0->constants.count, constant_count);
  if (!status) status = resolve_imports(lib, error, cap);
  if (!status) status = check_exports(lib, error, cap);
  if (status) { vmrt_library_close(lib); return status; }
  *out_library = lib;
  return 0;
}

void vmrt_library_close(vmrt_library_t* lib) {
  if (!lib) return;
  free(lib->constants);
  free(lib->import_funcs);
  free(lib->import_contexts);
  free(lib);
}

const char* vmrt_library_name(const vmrt_library_t* lib) { return lib->v0->header->name; }

uint32_t vmrt_library_export_count(const vmrt_library_t* lib) { return lib->v0->exports.count; }

void vmrt_library_export_info(const vmrt_library_t* lib, uint32_t ordinal,
                              vmrt_export_info_t* out) {
  memset(out, 0, sizeof(*out));
  if (ordinal >= lib->v0->exports.count) return;
  const vmrt_lib_dispatch_attrs_t* a = &lib->v0->exports.attrs[ordinal];
  out->name = lib->v0->exports.names[ordinal];
  out->local_memory_size = (uint32_t)a->local_memory_pages * VMRT_LOCAL_MEMORY_PAGE_SIZE;
  out->constant_count = a->constant_count;
  out->binding_count = a->binding_count;
  out->workgroup_size[0] = a->workgroup_size_x;
  out->workgroup_size[1] = a->workgroup_size_y;
  out->workgroup_size[2] = a->workgroup_size_z;
  out->flags = a->flags;
}

int vmrt_dispatch_block_init(vmrt_dispatch_block_t* b, const uint32_t size[3],
                             const uint32_t count[3], uint32_t max_concurrency,
                             const char* constants, size_t constants_size,
                             uint32_t binding_count) {
  if (size[2] > 0xFFFFu || count[2] > 0xFFFFu || constants_size % 4 ||
      constants_size > sizeof(b->constants) || binding_count > VMRT_MAX_BINDING_COUNT)
    return -1;
  b->state.workgroup_size_x = size[0];
  b->state.workgroup_size_y = size[1];
  b->state.workgroup_size_z = (uint16_t)size[2];
  b->state.constant_count = (uint16_t)(constants_size / 4);
  b->state.workgroup_count_x = count[0];
  b->state.workgroup_count_y = count[1];
  b->state.workgroup_count_z = (uint16_t)count[2];
  b->state.max_concurrency = (uint8_t)(max_concurrency > 255 ? 255 : max_concurrency);
  b->state.binding_count = (uint8_t)binding_count;
  if (constants_size) memcpy(b->constants, constants, constants_size);
  b->state.constants = b->constants;
  b->state.binding_ptrs = (void* const*)b->binding_addresses;
  b->state.binding_lengths = b->binding_lengths;
  b->ctrl_c_seen = vmrt_ctrl_c_start();
  b->interrupted = 0;
  return 0;
}

void vmrt_dispatch_blocks_copy(vmrt_dispatch_block_t* target,
                               const vmrt_dispatch_block_t* source, uint32_t count) {
  memcpy(target, source, (size_t)count * sizeof(*target));
  for (uint32_t i = 0; i < count; ++i) { /* the state points into its own block */
    target[i].state.constants = target[i].constants;
    target[i].state.binding_ptrs = (void* const*)target[i].binding_addresses;
    target[i].state.binding_lengths = target[i].binding_lengths;
  }
}

int vmrt_dispatch_blocks_bind(vmrt_dispatch_block_t* blocks, uint32_t count,
                              const uint64_t* addresses, const uint64_t* lengths,
                              size_t total) {
  size_t needed = 0;
  for (uint32_t i = 0; i < count; ++i) needed += blocks[i].state.binding_count;
  if (needed != total) return -1;
  size_t k = 0;
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t b = 0; b < blocks[i].state.binding_count; ++b, ++k) {
      blocks[i].binding_addresses[b] = (uintptr_t)addresses[k];
      blocks[i].binding_lengths[b] = (size_t)lengths[k];
    }
  }
  return 0;
}

/* iree_hal_buffer_calculate_range (vmrt/hal/buffer.py calculate_range, its
 * twin), for -2^61 < base < 2^61 and any max_length: 0 when the range is not
 * within [0, max_length), or when base + offset would overflow (such a start is
 * past the end of any buffer: the caller's next range check would fail). */
static int range_in(int64_t base, int64_t max_length, int64_t offset, int64_t length,
                    int64_t* out_start, int64_t* out_length) {
  if (offset < 0 || offset > max_length) return 0;
  if (length == -1) length = max_length - offset; /* WHOLE_BUFFER: to the end */
  if (length != 0 && (length < 0 || length > max_length - offset)) return 0;
  if (base > 0 && offset > INT64_MAX - base) return 0;
  *out_start = base + offset;
  *out_length = length;
  return 1;
}

int64_t vmrt_dispatch_blocks_bind_table(vmrt_dispatch_block_t* blocks, uint32_t count,
                                        const uint32_t* binding_entries,
                                        const int64_t* binding_ranges, size_t total,
                                        const int64_t* entries, uint32_t entry_count) {
  const int64_t limit = (int64_t)1 << 61;
  size_t needed = 0;
  for (uint32_t i = 0; i < count; ++i) needed += blocks[i].state.binding_count;
  if (needed != total) return -1;
  for (uint32_t e = 0; e < entry_count; ++e) {
    const int64_t* entry = entries + 5 * (size_t)e;
    if (entry[1] <= -limit || entry[1] >= limit || entry[3] < 0 || entry[3] >= limit ||
        entry[4] < 0 || entry[4] >= limit) {
      return -1;
    }
  }
  size_t k = 0;
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t b = 0; b < blocks[i].state.binding_count; ++b, ++k) {
      if (binding_entries[k] >= entry_count) return -1;
      const int64_t* entry = entries + 5 * (size_t)binding_entries[k];
      /* The reference within its table entry (resolve_ref: a length of -1 runs to
       * the end of the buffer), then within the entry's buffer (binding_span). */
      int64_t max_length = entry[2] == -1 ? entry[4] - entry[1] : entry[2];
      int64_t start, length;
      if (!range_in(entry[1], max_length, binding_ranges[2 * k], binding_ranges[2 * k + 1],
                    &start, &length)) {
        return (int64_t)k + 1;
      }
      if (start == 0 && length == entry[4]) {
        start = entry[3]; /* the whole buffer */
      } else if (!range_in(entry[3], entry[4], start, length, &start, &length)) {
        return (int64_t)k + 1;
      }
      blocks[i].binding_addresses[b] = length ? (uintptr_t)entry[0] + (uintptr_t)start : 0;
      blocks[i].binding_lengths[b] = (size_t)length;
    }
  }
  return 0;
}

/* Records the first failure; later ones (other workers) keep it. */
static int record_failure(vmrt_dispatch_block_t* b, int ret, uint64_t index) {
  int32_t expected = 0;
  if (__atomic_compare_exchange_n(&b->failed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    b->result = ret;
    b->failed_index = index;
  }
  return ret;
}

/* Ctrl-C stopped the dispatch before workgroup `index`. */
static int record_interruption(vmrt_dispatch_block_t* b, uint64_t index) {
  int32_t expected = 0;
  if (__atomic_compare_exchange_n(&b->failed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    b->interrupted = 1;
    b->failed_index = index;
  }
  return 1;
}

int vmrt_library_dispatch(const vmrt_library_t* lib, uint32_t ordinal,
                          vmrt_dispatch_block_t* b, uint64_t start, uint64_t stop,
                          uint32_t processor_id, void* local_memory,
                          uint32_t local_memory_size) {
  if (ordinal >= lib->v0->exports.count) return record_failure(b, -2, start);
  vmrt_lib_dispatch_fn_t fn = lib->v0->exports.ptrs[ordinal];
  const vmrt_lib_dispatch_state_t* state = &b->state;
  uint64_t cx = state->workgroup_count_x, cy = state->workgroup_count_y;
  uint64_t plane = cx * cy;
  if (!plane || start >= stop) return 0;
  vmrt_lib_workgroup_state_t wg;
  memset(&wg, 0, sizeof(wg));
  wg.processor_id = processor_id;
  wg.local_memory = local_memory;
  wg.local_memory_size = local_memory_size;
  for (uint64_t index = start; index < stop; ++index) {
    if (__atomic_load_n(&b->failed, __ATOMIC_RELAXED)) return 1;
    if (vmrt_ctrl_c_since(b->ctrl_c_seen)) return record_interruption(b, index);
    uint64_t rest = index % plane;
    wg.workgroup_id_z = (uint16_t)(index / plane);
    wg.workgroup_id_y = (uint32_t)(rest / cx);
    wg.workgroup_id_x = (uint32_t)(rest % cx);
    int ret = fn(&lib->environment, state, &wg);
    if (ret != 0) return record_failure(b, ret, index);
  }
  return 0;
}

int vmrt_library_dispatch_shared(const vmrt_library_t* lib, uint32_t ordinal,
                                 vmrt_dispatch_block_t* b, uint64_t total,
                                 uint32_t processor_id, void* local_memory,
                                 uint32_t local_memory_size) {
  uint64_t grain = b->grain ? b->grain : 1;
  /* Guided: each take is the rest divided as the first take divided the whole
   * (total / grain ways), at most `grain` and at least 1, so the last takes are
   * single workgroups and no participant is left holding a large share while
   * the others wait at the region's end. */
  uint64_t ways = total / grain ? total / grain : 1;
  uint64_t start = __atomic_load_n(&b->next, __ATOMIC_RELAXED);
  for (;;) {
    if (start >= total) return 0;
    uint64_t take = (total - start) / ways;
    if (take < 1) take = 1;
    if (take > grain) take = grain;
    if (!__atomic_compare_exchange_n(&b->next, &start, start + take, 1, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
      continue; /* (start now holds the counter another participant moved) */
    uint64_t stop = start + take;
    int ret = vmrt_library_dispatch(lib, ordinal, b, start, stop, processor_id,
                                    local_memory, local_memory_size);
    if (ret) return ret;
    /* Release: whoever sees the count sees the workgroups' writes. */
    __atomic_add_fetch(&b->done, stop - start, __ATOMIC_RELEASE);
    start = __atomic_load_n(&b->next, __ATOMIC_RELAXED);
  }
}

/* ---- system libraries ----------------------------------------------------- */

/* The memfd stays open while the library is loaded: the system loader knows a
 * library by its path (/proc/self/fd/N), and a live library's fd number cannot
 * be reused by the next one, which would otherwise be handed the old library. */
typedef struct vmrt_system_library {
  void* handle;
  int fd;
  vmrt_elf_module_t* image; /* what vmrt's checks learnt, attached to dlopen's copy */
} vmrt_system_library_t;

#define QUERY_NAME "iree_hal_executable_library_query"

static int write_all(int fd, const uint8_t* data, size_t size) {
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) return -1;
    written += (size_t)n;
  }
  return 0;
}

/* The image passes every check of vmrt's own loader, and those the system
 * loader needs (vmrt_elf_system.c), loaded here without running any of it;
 * returns the query's offset from the image's base. */
static int check_image(vmrt_system_library_t* lib, const uint8_t* data, size_t size,
                       uintptr_t* query_offset, char* error, size_t cap) {
  int status = vmrt_elf_load_ex(data, size, VMRT_ELF_LOAD_FOR_SYSTEM, &lib->image, error, cap);
  if (status) return status;
  void* query = NULL;
  status = vmrt_elf_find(lib->image, QUERY_NAME, &query);
  if (status == 3)
    return fail(error, cap, 3, "'" QUERY_NAME "' is not the start of code in the library");
  if (status) return fail(error, cap, 5, "library has no export '" QUERY_NAME "'");
  *query_offset = (uintptr_t)query - vmrt_elf_base(lib->image);
  vmrt_elf_detach(lib->image);
  return 0;
}

static int open_memory_file(vmrt_system_library_t* lib, const uint8_t* data, size_t size,
                            char* error, size_t cap) {
  lib->fd = memfd_create("vmrt-executable", MFD_CLOEXEC);
  if (lib->fd < 0) return fail(error, cap, 8, "cannot create a memory file for the library");
  if (write_all(lib->fd, data, size))
    return fail(error, cap, 8, "cannot write the library to a memory file");
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", lib->fd);
  lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) {
    const char* why = dlerror();
    return fail(error, cap, 3, "the system loader refused the library: %.300s",
                why ? why : "unknown error");
  }
  return 0;
}

int vmrt_system_library_load(const uint8_t* data, size_t size, void** out_handle,
                             void** out_query_fn, char* error, size_t cap) {
  *out_handle = NULL;
  *out_query_fn = NULL;
  vmrt_system_library_t* lib = calloc(1, sizeof(*lib));
  if (!lib) return fail(error, cap, 8, "out of memory");
  lib->fd = -1;
  uintptr_t query_offset = 0;
  int status = check_image(lib, data, size, &query_offset, error, cap);
  if (!status) status = open_memory_file(lib, data, size, error, cap);
  struct link_map* map = NULL;
  if (!status && (dlinfo(lib->handle, RTLD_DI_LINKMAP, &map) != 0 || !map))
    status = fail(error, cap, 13, "the system loader does not say where it loaded the library");
  void* query = NULL;
  if (!status) {
    vmrt_elf_attach(lib->image, (uintptr_t)map->l_addr);
    query = dlsym(lib->handle, QUERY_NAME);
    if ((uintptr_t)query != vmrt_elf_base(lib->image) + query_offset)
      status = fail(error, cap, 3, "the system loader resolved '" QUERY_NAME "' elsewhere "
                    "than the checked image says");
  }
  if (status) {
    vmrt_system_library_unload(lib);
    return status;
  }
  *out_handle = lib;
  *out_query_fn = query;
  return 0;
}

vmrt_elf_module_t* vmrt_system_library_image(void* handle) {
  return ((vmrt_system_library_t*)handle)->image;
}

void vmrt_system_library_unload(void* handle) {
  vmrt_system_library_t* lib = handle;
  if (!lib) return;
  if (lib->handle) dlclose(lib->handle);
  if (lib->fd >= 0) close(lib->fd);
  vmrt_elf_unload(lib->image);
  free(lib);
}
