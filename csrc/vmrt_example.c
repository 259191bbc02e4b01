/* The example C native module "cexample" (vmrt.native.example wraps it).
 *
 * Every cconv element type passes through it in both directions: scalars of
 * each width, refs (retained, moved, made, read), spans of tuples and multiple
 * results. It also has per-context state and exports that fail on purpose, so
 * the tests can check the marshalling against the rules in vmrt_native.h. */
#include <math.h>
#include <stdlib.h>

#include "vmrt_native.h"

/* Per-context state: a call counter. */
typedef struct vmrt_example_state_t {
  int32_t counter;
} vmrt_example_state_t;

static int32_t vmrt_example_live = 0;

/* States currently allocated (the tests check they are freed at teardown). */
int32_t vmrt_example_live_states(void) { return vmrt_example_live; }

static vmrt_status_t vmrt_example_alloc_state(void* module, void** out_state) {
  (void)module;
  vmrt_example_state_t* state =
      (vmrt_example_state_t*)calloc(1, sizeof(vmrt_example_state_t));
  if (!state) return VMRT_RESOURCE_EXHAUSTED;
  __atomic_add_fetch(&vmrt_example_live, 1, __ATOMIC_RELAXED);
  *out_state = state;
  return VMRT_OK;
}

static void vmrt_example_free_state(void* module, void* state) {
  (void)module;
  free(state);
  __atomic_sub_fetch(&vmrt_example_live, 1, __ATOMIC_RELAXED);
}

/* Argument/result structs beyond the single-type ones of the header. */
typedef struct { int32_t i0; int32_t i1; } vmrt_abi_ii_t;
typedef struct { int64_t i0; int64_t i1; } vmrt_abi_II_t;
typedef struct { float f0; float f1; } vmrt_abi_ff_t;
typedef struct { double f0; double f1; } vmrt_abi_FF_t;
typedef struct { int32_t i0; int64_t i1; float f2; double f3; } vmrt_abi_iIfF_t;
typedef struct { double f0; float f1; int64_t i2; int32_t i3; } vmrt_abi_FfIi_t;
typedef struct { vmrt_ref_t r0; vmrt_ref_t r1; } vmrt_abi_rr_t;
typedef struct { vmrt_ref_t r0; int32_t i1; } vmrt_abi_ri_t;
typedef struct {
  int32_t i0; int64_t i1; float f2; double f3; vmrt_ref_t r4;
} vmrt_abi_iIfFr_t;
typedef struct {
  int32_t i0;
  vmrt_size_t a1_count;
  vmrt_abi_iIfFr_t a1[];
} vmrt_abi_iCiIfFrD_t;
typedef struct {
  vmrt_size_t a0_count;
  vmrt_abi_i_t a0[];
} vmrt_abi_CiD_t;
typedef struct { vmrt_ref_t r0; int64_t i1; } vmrt_abi_rI_t;
typedef struct {
  vmrt_size_t a0_count;
  vmrt_abi_rI_t a0[];
} vmrt_abi_CrID_t;

/* -- scalars (the typed fast paths serve these) ----------------------------- */

VMRT_EXPORT(vmrt_example_add_1, void, i, i) {
  rets->i0 = (int32_t)((uint32_t)args->i0 + 1u);
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_div_i, void, ii, i) {
  if (args->i1 == 0) {
    return vmrt_make_status(stack, VMRT_INVALID_ARGUMENT,
                            "div_i: %d / 0", args->i0);
  }
  if (args->i0 == INT32_MIN && args->i1 == -1) {
    rets->i0 = INT32_MIN;
  } else {
    rets->i0 = args->i0 / args->i1;
  }
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_add_I, void, II, I) {
  rets->i0 = (int64_t)((uint64_t)args->i0 + (uint64_t)args->i1);
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_div_I, void, II, I) {
  if (args->i1 == 0) {
    return vmrt_make_status(stack, VMRT_INVALID_ARGUMENT, "div_I: %lld / 0",
                            (long long)args->i0);
  }
  if (args->i0 == INT64_MIN && args->i1 == -1) {
    rets->i0 = INT64_MIN;
  } else {
    rets->i0 = args->i0 / args->i1;
  }
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_min_I, void, v, I) {
  rets->i0 = INT64_MIN;
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_mul_f, void, ff, f) {
  rets->f0 = args->f0 * args->f1;
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_recip_f, void, f, f) {
  if (args->f0 == 0.0f) {
    return vmrt_make_status(stack, VMRT_OUT_OF_RANGE, "recip_f of zero");
  }
  rets->f0 = 1.0f / args->f0;
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_mul_F, void, FF, F) {
  rets->f0 = args->f0 * args->f1;
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_recip_F, void, F, F) {
  if (args->f0 == 0.0) {
    return vmrt_make_status(stack, VMRT_OUT_OF_RANGE, "recip_F of zero");
  }
  rets->f0 = 1.0 / args->f0;
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_nan_F, void, v, F) {
  rets->f0 = NAN;
  return VMRT_OK;
}

/* Fails with status |code| (a message only for codes below 8). */
VMRT_EXPORT(vmrt_example_check, void, i, v) {
  if (args->i0 == 0) return VMRT_OK;
  if (args->i0 < 8) {
    return vmrt_make_status(stack, args->i0, "check failed with %d",
                            args->i0);
  }
  return args->i0;
}

VMRT_EXPORT(vmrt_example_nothing, void, v, v) { return VMRT_OK; }

/* Each context counts its own calls. */
VMRT_EXPORT(vmrt_example_counter, vmrt_example_state_t, v, i) {
  rets->i0 = ++state->counter;
  return VMRT_OK;
}

/* Every scalar type, each aligned: (i, I, f, F) -> (F, f, I, i). */
VMRT_EXPORT(vmrt_example_reverse, void, iIfF, FfIi) {
  rets->f0 = args->f3;
  rets->f1 = args->f2;
  rets->i2 = args->i1;
  rets->i3 = args->i0;
  return VMRT_OK;
}

/* -- refs -------------------------------------------------------------------- */

VMRT_EXPORT(vmrt_example_ref_echo, void, r, r) {
  return vmrt_ref_retain(stack, &args->r0, &rets->r0);
}

VMRT_EXPORT(vmrt_example_ref_move, void, r, r) {
  vmrt_ref_move(&args->r0, &rets->r0);
  return VMRT_OK;
}

VMRT_EXPORT(vmrt_example_ref_swap, void, rr, rr) {
  VMRT_RETURN_IF_ERROR(vmrt_ref_retain(stack, &args->r1, &rets->r0));
  return vmrt_ref_retain(stack, &args->r0, &rets->r1);
}

VMRT_EXPORT(vmrt_example_ref_is_null, void, r, i) {
  rets->i0 = vmrt_ref_is_null(&args->r0);
  return VMRT_OK;
}

/* A fresh buffer of |length| bytes, each |value|. */
VMRT_EXPORT(vmrt_example_make_buffer, void, ii, r) {
  if (args->i0 < 0) {
    return vmrt_make_status(stack, VMRT_INVALID_ARGUMENT, "negative length %d",
                            args->i0);
  }
  VMRT_RETURN_IF_ERROR(vmrt_buffer_alloc(stack, (size_t)args->i0, &rets->r0));
  uint8_t* data = NULL;
  size_t length = 0;
  VMRT_RETURN_IF_ERROR(vmrt_buffer_span(stack, &rets->r0, 1, &data, &length));
  memset(data, args->i1 & 0xFF, length);
  return VMRT_OK;
}

/* Sum of a buffer's bytes (unsigned). */
VMRT_EXPORT(vmrt_example_buffer_sum, void, r, I) {
  if (args->r0.type != vmrt_lookup_type(stack, "vm.buffer")) {
    return vmrt_make_status(stack, VMRT_INVALID_ARGUMENT,
                            "buffer_sum: not a vm.buffer");
  }
  uint8_t* data = NULL;
  size_t length = 0;
  VMRT_RETURN_IF_ERROR(vmrt_buffer_span(stack, &args->r0, 0, &data, &length));
  int64_t sum = 0;
  for (size_t i = 0; i < length; ++i) sum += data[i];
  rets->i0 = sum;
  return VMRT_OK;
}

/* Sets every byte of a (mutable) buffer to |value|. */
VMRT_EXPORT(vmrt_example_buffer_fill, void, ri, v) {
  uint8_t* data = NULL;
  size_t length = 0;
  VMRT_RETURN_IF_ERROR(vmrt_buffer_span(stack, &args->r0, 1, &data, &length));
  memset(data, args->i1 & 0xFF, length);
  return VMRT_OK;
}

/* -- spans ------------------------------------------------------------------- */

VMRT_EXPORT(vmrt_example_span_sum, void, CiD, i) {
  uint32_t sum = 0;
  for (vmrt_size_t k = 0; k < args->a0_count; ++k) {
    sum += (uint32_t)args->a0[k].i0;
  }
  rets->i0 = (int32_t)sum;
  return VMRT_OK;
}

/* Element |index| of a span of (i, I, f, F, r) tuples. */
VMRT_EXPORT(vmrt_example_span_get, void, iCiIfFrD, iIfFr) {
  if (args->i0 < 0 || args->i0 >= args->a1_count) {
    return vmrt_make_status(stack, VMRT_OUT_OF_RANGE,
                            "span_get: index %d of %d elements", args->i0,
                            args->a1_count);
  }
  const vmrt_abi_iIfFr_t* e = &args->a1[args->i0];
  rets->i0 = e->i0;
  rets->i1 = e->i1;
  rets->f2 = e->f2;
  rets->f3 = e->f3;
  return vmrt_ref_retain(stack, &e->r4, &rets->r4);
}

/* Sum over (buffer, weight) of length(buffer) * weight. */
VMRT_EXPORT(vmrt_example_span_refs, void, CrID, I) {
  int64_t total = 0;
  for (vmrt_size_t k = 0; k < args->a0_count; ++k) {
    uint8_t* data = NULL;
    size_t length = 0;
    VMRT_RETURN_IF_ERROR(
        vmrt_buffer_span(stack, &args->a0[k].r0, 0, &data, &length));
    total += (int64_t)length * args->a0[k].i1;
  }
  rets->i0 = total;
  return VMRT_OK;
}

/* A ref it does not own: the runtime must reject it. */
VMRT_EXPORT(vmrt_example_bad_ref, void, v, r) {
  rets->r0.ptr = (void*)(uintptr_t)0x10;
  rets->r0.type = 1;
  return VMRT_OK;
}

/* -- the descriptor ---------------------------------------------------------- */

static const vmrt_export_descriptor_t vmrt_example_exports[] = {
    {"add_1", "0i_i", vmrt_example_add_1},
    {"div_i", "0ii_i", vmrt_example_div_i},
    {"add_I", "0II_I", vmrt_example_add_I},
    {"div_I", "0II_I", vmrt_example_div_I},
    {"min_I", "0v_I", vmrt_example_min_I},
    {"mul_f", "0ff_f", vmrt_example_mul_f},
    {"recip_f", "0f_f", vmrt_example_recip_f},
    {"mul_F", "0FF_F", vmrt_example_mul_F},
    {"recip_F", "0F_F", vmrt_example_recip_F},
    {"nan_F", "0v_F", vmrt_example_nan_F},
    {"check", "0i_v", vmrt_example_check},
    {"nothing", "0v_v", vmrt_example_nothing},
    {"counter", "0v_i", vmrt_example_counter},
    {"reverse", "0iIfF_FfIi", vmrt_example_reverse},
    {"ref_echo", "0r_r", vmrt_example_ref_echo},
    {"ref_move", "0r_r", vmrt_example_ref_move},
    {"ref_swap", "0rr_rr", vmrt_example_ref_swap},
    {"ref_is_null", "0r_i", vmrt_example_ref_is_null},
    {"make_buffer", "0ii_r", vmrt_example_make_buffer},
    {"buffer_sum", "0r_I", vmrt_example_buffer_sum},
    {"buffer_fill", "0ri_v", vmrt_example_buffer_fill},
    {"span_sum", "0CiD_i", vmrt_example_span_sum},
    {"span_get", "0iCiIfFrD_iIfFr", vmrt_example_span_get},
    {"span_refs", "0CrID_I", vmrt_example_span_refs},
    {"bad_ref", "0v_r", vmrt_example_bad_ref},
};

static const vmrt_module_descriptor_t vmrt_example_descriptor = {
    VMRT_NATIVE_ABI_VERSION,
    1,
    "cexample",
    NULL,
    vmrt_example_alloc_state,
    vmrt_example_free_state,
    sizeof(vmrt_example_exports) / sizeof(vmrt_example_exports[0]),
    vmrt_example_exports,
};

const vmrt_module_descriptor_t* vmrt_example_module(void) {
  return &vmrt_example_descriptor;
}
