"""cffi (API mode) build script for vmrt's C helpers; run by setup.py at install.

One extension, vmrt._cnative, holds:

- vmrt_memory.c: byte copy/fill and the batched span operations (vmrt/memory.py);
- vmrt_native_call.c: calling C native-module exports (vmrt/native/cmodule.py),
  with the host services of vmrt/native/include/vmrt_native.h implemented as
  `extern "Python"` callbacks;
- vmrt_caller.c: `vmrt._cnative.Caller`, the fast path for exports whose cconv
  has only scalars (installed into the module by vmrt_caller_install());
- vmrt_aligned.c: `vmrt._cnative.aligned_bytearray`, HAL buffers' aligned zeroed
  memory and its address (vmrt/hal/buffer.py; vmrt_aligned_install());
- vmrt_example.c: the example C module `cexample` (vmrt/native/example.py).
"""

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent

CDEF = """
    void vmrt_copy_bytes(uint8_t* target, const uint8_t* source, size_t length);
    void vmrt_fill_pattern(uint8_t* target, size_t length, const uint8_t* pattern,
                           size_t pattern_length);
    int64_t vmrt_copy_spans(uint8_t* target, int64_t target_size,
                            const uint8_t* source, int64_t source_size,
                            const int64_t* spans, int64_t count);
    int64_t vmrt_fill_spans(uint8_t* target, int64_t target_size,
                            const int64_t* spans, int64_t count,
                            const uint8_t* pattern, int64_t pattern_length);
    int64_t vmrt_compare_spans(const uint8_t* lhs, int64_t lhs_size,
                               const uint8_t* rhs, int64_t rhs_size,
                               const int64_t* spans, int64_t count,
                               int64_t* out_mismatch);

    typedef intptr_t vmrt_status_t;
    typedef uintptr_t vmrt_ref_type_t;
    typedef int32_t vmrt_size_t;
    typedef struct vmrt_ref_t { void* ptr; vmrt_ref_type_t type; } vmrt_ref_t;
    typedef vmrt_status_t (*vmrt_native_fn_t)(void* stack, void* module,
                                              void* module_state, void* args, void* rets);
    typedef vmrt_status_t (*vmrt_alloc_state_fn_t)(void* module, void** out_state);
    typedef void (*vmrt_free_state_fn_t)(void* module, void* module_state);
    typedef struct vmrt_export_descriptor_t {
      const char* name;
      const char* cconv;
      vmrt_native_fn_t fn;
    } vmrt_export_descriptor_t;
    typedef struct vmrt_module_descriptor_t {
      uint32_t abi_version;
      uint32_t version;
      const char* name;
      void* module;
      vmrt_alloc_state_fn_t alloc_state;
      vmrt_free_state_fn_t free_state;
      size_t export_count;
      const vmrt_export_descriptor_t* exports;
    } vmrt_module_descriptor_t;
    typedef struct vmrt_call_t {
      vmrt_native_fn_t fn;
      void* stack;
      void* module;
      void* state;
    } vmrt_call_t;

    vmrt_status_t vmrt_call_packed(const vmrt_call_t* call, void* block, size_t rets_offset);
    vmrt_status_t vmrt_alloc_state(vmrt_alloc_state_fn_t fn, void* module, void** out_state);
    void vmrt_free_state(vmrt_free_state_fn_t fn, void* module, void* state);
    const char* vmrt_status_message(void);
    vmrt_status_t vmrt_host_make_status(int32_t code, const char* message);
    void* vmrt_default_stack(void);
    uint32_t vmrt_native_abi_version(void);

    extern "Python" vmrt_status_t vmrt_py_ref_retain(const vmrt_ref_t*, vmrt_ref_t*);
    extern "Python" vmrt_status_t vmrt_py_ref_release(vmrt_ref_t*);
    extern "Python" vmrt_status_t vmrt_py_buffer_span(const vmrt_ref_t*, int32_t,
                                                       uint8_t**, size_t*);
    extern "Python" vmrt_status_t vmrt_py_buffer_alloc(size_t, vmrt_ref_t*);
    extern "Python" vmrt_ref_type_t vmrt_py_lookup_type(const char*);

    const vmrt_module_descriptor_t* vmrt_example_module(void);
    int32_t vmrt_example_live_states(void);

    int vmrt_caller_install(void);
    int vmrt_aligned_install(void);

    /* Native CPU executables (vmrt_executable.c) */
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
    typedef struct vmrt_export_info_t {
      const char* name;
      uint32_t local_memory_size;
      uint32_t constant_count;
      uint32_t binding_count;
      uint32_t workgroup_size[3];
      uint64_t flags;
    } vmrt_export_info_t;
    typedef struct vmrt_dispatch_block_t {
      vmrt_lib_dispatch_state_t state;
      uint32_t constants[64];
      uintptr_t binding_addresses[64];
      size_t binding_lengths[64];
      uint64_t next;
      uint64_t grain;
      uint64_t done;
      int32_t failed;
      int32_t result;
      uint64_t failed_index;
      int64_t ctrl_c_seen;
      int32_t interrupted;
    } vmrt_dispatch_block_t;
    int vmrt_dispatch_block_init(vmrt_dispatch_block_t* block, const uint32_t workgroup_size[3],
                                 const uint32_t workgroup_count[3], uint32_t max_concurrency,
                                 const char* constants, size_t constants_size,
                                 uint32_t binding_count);
    void vmrt_dispatch_blocks_copy(vmrt_dispatch_block_t* target,
                                   const vmrt_dispatch_block_t* source, uint32_t count);
    int vmrt_dispatch_blocks_bind(vmrt_dispatch_block_t* blocks, uint32_t count,
                                  const uint64_t* addresses, const uint64_t* lengths,
                                  size_t total);
    int64_t vmrt_dispatch_blocks_bind_table(vmrt_dispatch_block_t* blocks, uint32_t count,
                                            const uint32_t* binding_entries,
                                            const int64_t* binding_ranges, size_t total,
                                            const int64_t* entries, uint32_t entry_count);
    typedef struct vmrt_library vmrt_library_t;
    void vmrt_cpu_data(uint64_t out[8]);
    typedef struct vmrt_elf_module vmrt_elf_module_t;
    int vmrt_library_open(void* query_fn, vmrt_elf_module_t* image,
                          const uint32_t* constants, uint32_t constant_count,
                          vmrt_library_t** out_library, char* error, size_t error_capacity);
    void vmrt_library_close(vmrt_library_t* library);
    const char* vmrt_library_name(const vmrt_library_t* library);
    uint32_t vmrt_library_export_count(const vmrt_library_t* library);
    void vmrt_library_export_info(const vmrt_library_t* library, uint32_t ordinal,
                                  vmrt_export_info_t* out_info);
    int vmrt_library_dispatch(const vmrt_library_t* library, uint32_t ordinal,
                              vmrt_dispatch_block_t* block, uint64_t start, uint64_t stop,
                              uint32_t processor_id, void* local_memory,
                              uint32_t local_memory_size);
    int vmrt_library_dispatch_shared(const vmrt_library_t* library, uint32_t ordinal,
                                     vmrt_dispatch_block_t* block, uint64_t total,
                                     uint32_t processor_id, void* local_memory,
                                     uint32_t local_memory_size);
    /* Ctrl-C for loops without the GIL (vmrt_ctrl_c.c) */
    extern int64_t vmrt_ctrl_c_presses;
    int vmrt_ctrl_c_watch(void);
    /* Native dispatches of a command buffer in one call (vmrt_pool.c) */
    typedef struct vmrt_pool_task_t {
      const vmrt_library_t* library;
      uint32_t ordinal;
      uint32_t region;
    } vmrt_pool_task_t;
    typedef struct vmrt_pool vmrt_pool_t;
    vmrt_pool_t* vmrt_pool_create(uint32_t participants, int pin_workers);
    void vmrt_pool_destroy(vmrt_pool_t* pool);
    int64_t vmrt_pool_run(vmrt_pool_t* pool, const vmrt_pool_task_t* tasks,
                          vmrt_dispatch_block_t* blocks, uint32_t count);
    int vmrt_system_library_load(const uint8_t* data, size_t size, void** out_handle,
                                 void** out_query_fn, char* error, size_t error_capacity);
    vmrt_elf_module_t* vmrt_system_library_image(void* handle);
    void vmrt_system_library_unload(void* handle);
    /* ELF loader (vmrt_elf.c, vmrt_elf_headers.c, vmrt_elf_system.c) */
    enum { VMRT_ELF_LOAD_NO_INITIALIZERS = 1, VMRT_ELF_LOAD_FOR_SYSTEM = 2 };
    int vmrt_elf_check_headers(const uint8_t* data, size_t size, uint32_t flags, char* error,
                               size_t error_capacity);
    int vmrt_elf_load(const uint8_t* data, size_t size, vmrt_elf_module_t** out_module,
                      char* error, size_t error_capacity);
    int vmrt_elf_load_ex(const uint8_t* data, size_t size, uint32_t flags,
                         vmrt_elf_module_t** out_module, char* error, size_t error_capacity);
    void* vmrt_elf_lookup(vmrt_elf_module_t* module, const char* name);
    int vmrt_elf_find(vmrt_elf_module_t* module, const char* name, void** out_address);
    void vmrt_elf_unload(vmrt_elf_module_t* module);
    uintptr_t vmrt_elf_base(vmrt_elf_module_t* module);
    size_t vmrt_elf_size(vmrt_elf_module_t* module);
"""

PREAMBLE = """
#include "vmrt_memory.h"
#include "vmrt_native_call.h"
/* ELF loader (vmrt_elf.c) */
#include "vmrt_elf.h"
#include "vmrt_executable.h"  /* native CPU executables */
#include "vmrt_pool.h"  /* their workers */
#include "vmrt_ctrl_c.h"  /* Ctrl-C in loops without the GIL */

/* Host services: extern "Python" callbacks that cffi defines further down. */
static vmrt_status_t vmrt_py_ref_retain(const vmrt_ref_t*, vmrt_ref_t*);
static vmrt_status_t vmrt_py_ref_release(vmrt_ref_t*);
static vmrt_status_t vmrt_py_buffer_span(const vmrt_ref_t*, int32_t, uint8_t**, size_t*);
static vmrt_status_t vmrt_py_buffer_alloc(size_t, vmrt_ref_t*);
static vmrt_ref_type_t vmrt_py_lookup_type(const char*);

static const vmrt_host_api_t vmrt_host_api = {
    VMRT_NATIVE_ABI_VERSION,
    sizeof(vmrt_host_api_t),
    vmrt_host_make_status,
    vmrt_py_ref_retain,
    vmrt_py_ref_release,
    vmrt_py_buffer_span,
    vmrt_py_buffer_alloc,
    vmrt_py_lookup_type,
};
static vmrt_stack_t vmrt_host_stack = {&vmrt_host_api};

static void* vmrt_default_stack(void) { return &vmrt_host_stack; }
static uint32_t vmrt_native_abi_version(void) { return VMRT_NATIVE_ABI_VERSION; }

const vmrt_module_descriptor_t* vmrt_example_module(void);
int32_t vmrt_example_live_states(void);
int vmrt_caller_install(void);
int vmrt_aligned_install(void);
"""



def make_builder(root: Path) -> FFI:
    """The builder with paths under `root` (relative for setuptools)."""
    csrc = root / "csrc"
    builder = FFI()
    builder.cdef(CDEF)
    builder.set_source(
        "vmrt._cnative",
        PREAMBLE,
        sources=[str(csrc / "vmrt_memory.c"), str(csrc / "vmrt_native_call.c"),
                 str(csrc / "vmrt_caller.c"), str(csrc / "vmrt_aligned.c"),
                 str(csrc / "vmrt_example.c"),
                 str(csrc / "vmrt_executable.c"), str(csrc / "vmrt_pool.c"),
                 # ELF loader
                 str(csrc / "vmrt_elf.c"), str(csrc / "vmrt_elf_headers.c"),
                 str(csrc / "vmrt_elf_functions.c"), str(csrc / "vmrt_elf_system.c"),
                 str(csrc / "vmrt_ctrl_c.c")],
        include_dirs=[str(csrc), str(root / "vmrt" / "native" / "include")],
        extra_compile_args=["-O2", "-Wall", "-pthread"],
        extra_link_args=["-pthread"],
    )
    return builder


ffibuilder = make_builder(Path("."))

if __name__ == "__main__":
    make_builder(HERE.parent).compile(tmpdir=str(HERE.parent / "build" / "cffi"),
                                      verbose=True)
