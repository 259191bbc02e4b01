/* vmrt native modules in C: the export ABI, argument/result structs and the
 * host services a C export may call.
 *
 * An export has upstream IREE's shim shape (runtime/src/iree/vm/shims.h):
 *
 *     status = fn(stack, module, module_state, args, rets)
 *
 * where |args| and |rets| point at structs laid out from the export's calling
 * convention string (cconv) by these rules, which are the ones of upstream's
 * iree_vm_function_call_compute_cconv_fragment_size (vm/module.c) and of the
 * bytecode dispatcher that fills the argument buffer (vm/bytecode/dispatch.c):
 *
 *   i, f   4 bytes (int32_t / float), aligned to 4
 *   I, F   8 bytes (int64_t / double), aligned to 8
 *   r      a vmrt_ref_t (two pointer-sized words), aligned to a pointer
 *   v      nothing; an empty fragment is the 4-byte struct { int unused; }
 *   C..D   a span: an int32_t count, then |count| elements, each laid out as
 *          the C struct of the span's types, aligned to that struct
 *   the whole struct is padded to its largest alignment
 *
 * so a plain C struct with the fields in cconv order has the right layout,
 * e.g. "0rIiCiID_v" is
 *
 *     typedef struct { int32_t i0; int64_t i1; } vmrt_abi_iI_t;
 *     typedef struct {
 *       vmrt_ref_t r0; int64_t i1; int32_t i2;
 *       vmrt_size_t a3_count; vmrt_abi_iI_t a3[];
 *     } vmrt_abi_rIiCiID_t;
 *
 * Results are zeroed before the call. Refs follow upstream's ownership rules:
 * argument refs are owned by |args| for the duration of the call (retain one
 * to keep it, or move it out by copying and zeroing the field); a ref stored
 * in |rets| transfers one reference to the caller (retain or move it there).
 *
 * Status: return VMRT_OK (0) or a status code; vmrt_make_status() attaches a
 * message. The runtime releases the GIL while a C export runs; the host
 * services below take it back when they need Python.
 */
#ifndef VMRT_NATIVE_H_
#define VMRT_NATIVE_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VMRT_NATIVE_ABI_VERSION 1

/* 0 is OK; anything else is an IREE status code (iree/base/status.h). */
typedef intptr_t vmrt_status_t;
enum {
  VMRT_OK = 0,
  VMRT_CANCELLED = 1,
  VMRT_UNKNOWN = 2,
  VMRT_INVALID_ARGUMENT = 3,
  VMRT_DEADLINE_EXCEEDED = 4,
  VMRT_NOT_FOUND = 5,
  VMRT_ALREADY_EXISTS = 6,
  VMRT_PERMISSION_DENIED = 7,
  VMRT_RESOURCE_EXHAUSTED = 8,
  VMRT_FAILED_PRECONDITION = 9,
  VMRT_ABORTED = 10,
  VMRT_OUT_OF_RANGE = 11,
  VMRT_UNIMPLEMENTED = 12,
  VMRT_INTERNAL = 13,
  VMRT_UNAVAILABLE = 14,
  VMRT_DATA_LOSS = 15,
  VMRT_UNAUTHENTICATED = 16,
};

/* A span count (upstream iree_vm_size_t). */
typedef int32_t vmrt_size_t;

/* A reference: the same two words as upstream's iree_vm_ref_t. |ptr| names a
 * runtime object (NULL for the null ref); |type| is its registered type
 * (compare with vmrt_lookup_type()). Treat both as opaque. */
typedef uintptr_t vmrt_ref_type_t;
typedef struct vmrt_ref_t {
  void* ptr;
  vmrt_ref_type_t type;
} vmrt_ref_t;

/* Services of the runtime, reached through the |stack| argument. */
typedef struct vmrt_host_api_t {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Stores |message| for the current thread and returns |code|. */
  vmrt_status_t (*make_status)(int32_t code, const char* message);
  /* Retains |ref| into |out_ref| (releasing what |out_ref| held). */
  vmrt_status_t (*ref_retain)(const vmrt_ref_t* ref, vmrt_ref_t* out_ref);
  /* Releases |ref| and sets it to null. */
  vmrt_status_t (*ref_release)(vmrt_ref_t* ref);
  /* The bytes of a vm.buffer: valid while the ref is held. |writable|
   * requests a mutable buffer (PERMISSION_DENIED for read-only ones). */
  vmrt_status_t (*buffer_span)(const vmrt_ref_t* ref, int32_t writable,
                               uint8_t** out_data, size_t* out_length);
  /* A new zeroed, mutable vm.buffer of |length| bytes, retained into
   * |out_ref|. */
  vmrt_status_t (*buffer_alloc)(size_t length, vmrt_ref_t* out_ref);
  /* The type of refs registered as |name| ("vm.buffer"), or 0. */
  vmrt_ref_type_t (*lookup_type)(const char* name);
} vmrt_host_api_t;

typedef struct vmrt_stack_t {
  const vmrt_host_api_t* host;
} vmrt_stack_t;

/* Every export has this signature (VMRT_EXPORT writes it for you). */
typedef vmrt_status_t (*vmrt_native_fn_t)(void* stack, void* module,
                                          void* module_state, void* args,
                                          void* rets);
/* Per-context state: created when the module is registered in a context and
 * freed when the context is closed. */
typedef vmrt_status_t (*vmrt_alloc_state_fn_t)(void* module, void** out_state);
typedef void (*vmrt_free_state_fn_t)(void* module, void* module_state);

/* A module described in C (see vmrt.native.load_c_module). */
typedef struct vmrt_export_descriptor_t {
  const char* name;
  const char* cconv;
  vmrt_native_fn_t fn;
} vmrt_export_descriptor_t;

typedef struct vmrt_module_descriptor_t {
  uint32_t abi_version; /* VMRT_NATIVE_ABI_VERSION */
  uint32_t version;
  const char* name;
  void* module; /* passed as |module| to every export; may be NULL */
  vmrt_alloc_state_fn_t alloc_state; /* may be NULL (state is NULL) */
  vmrt_free_state_fn_t free_state;   /* may be NULL */
  size_t export_count;
  const vmrt_export_descriptor_t* exports;
} vmrt_module_descriptor_t;

/* Argument/result structs of the single types (more are plain C structs). */
typedef struct vmrt_abi_v_t { int unused; } vmrt_abi_v_t;
typedef struct vmrt_abi_i_t { int32_t i0; } vmrt_abi_i_t;
typedef struct vmrt_abi_I_t { int64_t i0; } vmrt_abi_I_t;
typedef struct vmrt_abi_f_t { float f0; } vmrt_abi_f_t;
typedef struct vmrt_abi_F_t { double f0; } vmrt_abi_F_t;
typedef struct vmrt_abi_r_t { vmrt_ref_t r0; } vmrt_abi_r_t;

/* Defines export |name| with typed arguments:
 *
 *     VMRT_EXPORT(my_add, my_state_t, ii, i) {
 *       rets->i0 = args->i0 + args->i1;
 *       return VMRT_OK;
 *     }
 *
 * uses vmrt_abi_ii_t and vmrt_abi_i_t, gives the body |stack|, |module|,
 * |state|, |args| and |rets|, and defines |name| with the uniform
 * vmrt_native_fn_t signature so that its address can go in a descriptor. */
#define VMRT_EXPORT(name, state_type, arg_types, ret_types)                  \
  static vmrt_status_t name##_body(vmrt_stack_t* stack, void* module,       \
                                   state_type* state,                       \
                                   vmrt_abi_##arg_types##_t* args,          \
                                   vmrt_abi_##ret_types##_t* rets);         \
  vmrt_status_t name(void* stack, void* module, void* module_state,         \
                     void* args, void* rets) {                              \
    return name##_body((vmrt_stack_t*)stack, module,                        \
                       (state_type*)module_state,                           \
                       (vmrt_abi_##arg_types##_t*)args,                     \
                       (vmrt_abi_##ret_types##_t*)rets);                    \
  }                                                                         \
  static vmrt_status_t name##_body(vmrt_stack_t* stack, void* module,       \
                                   state_type* state,                       \
                                   vmrt_abi_##arg_types##_t* args,          \
                                   vmrt_abi_##ret_types##_t* rets)

#define VMRT_RETURN_IF_ERROR(expr)       \
  do {                                   \
    vmrt_status_t vmrt_status_ = (expr); \
    if (vmrt_status_) return vmrt_status_; \
  } while (0)

static inline vmrt_status_t vmrt_make_status(vmrt_stack_t* stack, int32_t code,
                                             const char* format, ...) {
  char message[512];
  va_list varargs;
  va_start(varargs, format);
  vsnprintf(message, sizeof(message), format, varargs);
  va_end(varargs);
  return stack->host->make_status(code, message);
}

static inline vmrt_status_t vmrt_ref_retain(vmrt_stack_t* stack,
                                            const vmrt_ref_t* ref,
                                            vmrt_ref_t* out_ref) {
  return stack->host->ref_retain(ref, out_ref);
}

static inline vmrt_status_t vmrt_ref_release(vmrt_stack_t* stack,
                                             vmrt_ref_t* ref) {
  return stack->host->ref_release(ref);
}

/* Moves |ref| into the null ref |out_ref| without touching counts. */
static inline void vmrt_ref_move(vmrt_ref_t* ref, vmrt_ref_t* out_ref) {
  *out_ref = *ref;
  ref->ptr = NULL;
  ref->type = 0;
}

static inline int vmrt_ref_is_null(const vmrt_ref_t* ref) {
  return ref->ptr == NULL;
}

static inline vmrt_status_t vmrt_buffer_span(vmrt_stack_t* stack,
                                             const vmrt_ref_t* ref,
                                             int32_t writable,
                                             uint8_t** out_data,
                                             size_t* out_length) {
  return stack->host->buffer_span(ref, writable, out_data, out_length);
}

static inline vmrt_status_t vmrt_buffer_alloc(vmrt_stack_t* stack,
                                              size_t length,
                                              vmrt_ref_t* out_ref) {
  return stack->host->buffer_alloc(length, out_ref);
}

static inline vmrt_ref_type_t vmrt_lookup_type(vmrt_stack_t* stack,
                                               const char* name) {
  return stack->host->lookup_type(name);
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* VMRT_NATIVE_H_ */
