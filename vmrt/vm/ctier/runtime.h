/* What the C tier's generated code stands on (vmrt/vm/ctier/cgen.py writes the rest).
 *
 * Every value a module can name is checked here before it is used: buffer and list
 * accesses are bounds-checked, integer arithmetic wraps through unsigned types,
 * division by zero and INT_MIN / -1 are caught, float to integer conversions are
 * range-checked, and the build turns off contraction and fast-math
 * (vmrt/vm/ctier/build.py). The numerics mirror vmrt/vm/numerics.py (the Python
 * tier), function for function, so both tiers give the same bits.
 *
 * A failure records what went wrong in the vmrt_ctx (a kind and its numbers, the
 * failing instruction and then each caller's call site) and every frame returns 1;
 * the host builds the same VMError the Python tier raises (vmrt/vm/ctier/runtime.py).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VMRT_LIKELY(x) __builtin_expect(!!(x), 1)
/* What one unit of a build defines and another calls (build.py compiles a module's
   functions in several units): internal to the extension module. */
#define VMRT_INTERNAL __attribute__((visibility("hidden")))
#define VMRT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* -- refs: buffers and lists of buffers ------------------------------------------ */
#define VMRT_KIND_BUFFER 1
#define VMRT_KIND_LIST 2

typedef struct vmrt_ref {
  int32_t kind;
  int32_t is_mutable;
  int64_t refcount;        /* < 0: owned by the host, never freed here */
  uint8_t *data;           /* buffer bytes */
  uint64_t length;         /* buffer length in bytes */
  struct vmrt_ref **items; /* list elements (NULL where not a buffer) */
  uint64_t count;          /* list size */
  int64_t host_id;         /* the host's object for error messages; -1: made here */
  void *charged;           /* made here under limits: the call whose meter it is charged to */
} vmrt_ref;

/* The host's memory meter (runtime.py, cffi `extern "Python"`), under limits with a
   memory bound only (c->meter_memory): charge fails (1) over the limit; uncharge gives
   the bytes back when freed. A buffer made here never outlives the C call making it
   (no C formula stores a ref but in registers, and results are scalars): without a
   bound, no one could be refused and nothing is left in use once the call returns,
   so its bytes are not counted (two Python callbacks per allocation saved). */
VMRT_INTERNAL int32_t vmrt_charge_cb(void *call, int64_t bytes);
VMRT_INTERNAL void vmrt_uncharge_cb(void *call, int64_t bytes);

typedef struct vmrt_inst {
  uint8_t *rw;          /* the instance's global byte storage */
  uint64_t rw_size;
  vmrt_ref **rodata;    /* one read-only buffer per rodata segment */
  uint64_t rodata_count;
} vmrt_inst;

#define VMRT_MAX_FRAMES 64

typedef struct vmrt_ctx {
  vmrt_inst *inst;
  int32_t max_depth;
  int32_t err_kind;
  int64_t err_a, err_b, err_c;
  vmrt_ref *err_ref;
  int32_t frame_count;     /* frames recorded, innermost first; more are counted only */
  int32_t frames[2 * VMRT_MAX_FRAMES]; /* (function ordinal, pc) pairs */
  int64_t fuel;            /* limits: spent by VMRT_CHARGE, refilled by the host */
  void *host;              /* the host's state of this call (runtime.py CCall) */
  int32_t meter_memory;    /* limits with a memory bound: buffers made here charge it */
  int64_t results[16];     /* an entry's results: ints, or a float's bits */
  const int64_t *ctrl_c;   /* the host's count of Ctrl-C presses (vmrt/ctrl_c.py), or NULL */
  int64_t ctrl_c_seen;     /* ... when the host's call came in (VMRT_CTRL_C_NOTE) */
  int (*ctrl_c_watch)(void); /* keeps the count's handler in place (or NULL) */
} vmrt_ctx;

/* Ctrl-C: an entry notes the count, and the call stops once it has moved (checked
   where a slice of fuel ends, and before each workgroup of a dispatch). */
#define VMRT_CTRL_C_NOTE(c) \
  ((c)->ctrl_c_seen = (c)->ctrl_c != NULL ? __atomic_load_n((c)->ctrl_c, __ATOMIC_RELAXED) : 0)
#define VMRT_CTRL_C_PRESSED(c) \
  ((c)->ctrl_c != NULL && __atomic_load_n((c)->ctrl_c, __ATOMIC_RELAXED) != (c)->ctrl_c_seen)

/* Error kinds: VMRT_E_<NAME>, declared once in vmrt/vm/ctier/cgen.py (ErrorKind) and
   emitted at the top of each generated source, where these macros expand. */

static void vmrt_frame(vmrt_ctx *c, int32_t ordinal, int32_t pc) {
  if (c->frame_count < VMRT_MAX_FRAMES) {
    c->frames[2 * c->frame_count] = ordinal;
    c->frames[2 * c->frame_count + 1] = pc;
  }
  c->frame_count++;
}

static int32_t vmrt_error(vmrt_ctx *c, int32_t kind, int64_t a, int64_t b, vmrt_ref *ref) {
  c->err_kind = kind;
  c->err_a = a;
  c->err_b = b;
  c->err_ref = ref;
  return 1;
}

/* A function's failure exit: its (ordinal, pc) recorded, then `goto fail`. */
#define VMRT_RAISE(pc, kind, a, b, ref) \
  do { vmrt_error(c, (kind), (int64_t)(a), (int64_t)(b), (ref)); \
       vmrt_frame(c, VMRT_ORDINAL, (pc)); goto fail; } while (0)

static void vmrt_retain(vmrt_ref *r) {
  if (r != NULL && r->refcount >= 0) r->refcount++;
}

static void vmrt_release(vmrt_ref *r) {
  if (r != NULL && r->refcount > 0 && --r->refcount == 0) {
    if (r->charged != NULL) vmrt_uncharge_cb(r->charged, (int64_t)r->length);
    free(r->data);
    free(r);
  }
}

#define VMRT_SET_REF(reg, value) \
  do { vmrt_ref *v_ = (value); vmrt_retain(v_); vmrt_release(reg); (reg) = v_; } while (0)
#define VMRT_MOVE_REF(dst, src) \
  do { if ((dst) != (src)) { vmrt_release(dst); (dst) = (src); (src) = NULL; } } while (0)
#define VMRT_DROP_REF(reg) do { vmrt_release(reg); (reg) = NULL; } while (0)

/* The buffer operand of instruction `pc`, or the instruction fails. */
#define VMRT_BUFFER(pc, ref) \
  do { if (VMRT_UNLIKELY((ref) == NULL)) VMRT_RAISE(pc, VMRT_E_NULL_REF, 0, 0, NULL); \
       if (VMRT_UNLIKELY((ref)->kind != VMRT_KIND_BUFFER)) \
         VMRT_RAISE(pc, VMRT_E_WRONG_REF, 0, 0, (ref)); } while (0)

/* Element `off` of width W (offsets count elements; negative ones are huge). */
#define VMRT_LOAD(pc, T, W, dst, ref, off) \
  do { vmrt_ref *b_ = (ref); int64_t o_ = (int64_t)(off); VMRT_BUFFER(pc, b_); \
       if (VMRT_UNLIKELY(o_ < 0 || (uint64_t)o_ >= b_->length / (W))) \
         VMRT_RAISE(pc, VMRT_E_RANGE_ELEMENTS, o_, (W), b_); \
       T v_; memcpy(&v_, b_->data + (uint64_t)o_ * (W), (W)); (dst) = v_; } while (0)

#define VMRT_STORE(pc, T, W, value, ref, off) \
  do { vmrt_ref *b_ = (ref); int64_t o_ = (int64_t)(off); VMRT_BUFFER(pc, b_); \
       if (VMRT_UNLIKELY(!b_->is_mutable)) VMRT_RAISE(pc, VMRT_E_READ_ONLY, 0, 0, b_); \
       if (VMRT_UNLIKELY(o_ < 0 || (uint64_t)o_ >= b_->length / (W))) \
         VMRT_RAISE(pc, VMRT_E_RANGE_ELEMENTS, o_, (W), b_); \
       T v_ = (T)(value); memcpy(b_->data + (uint64_t)o_ * (W), &v_, (W)); } while (0)

/* vm.buffer.fill: offset and count in elements of width W. */
#define VMRT_FILL(pc, T, W, ref, off, len, value) \
  do { vmrt_ref *b_ = (ref); int64_t o_ = (int64_t)(off), n_ = (int64_t)(len); \
       VMRT_BUFFER(pc, b_); \
       if (VMRT_UNLIKELY(!b_->is_mutable)) VMRT_RAISE(pc, VMRT_E_READ_ONLY, 0, 0, b_); \
       if (VMRT_UNLIKELY(o_ < 0 || n_ < 0 || (uint64_t)o_ > b_->length / (W) \
                         || (uint64_t)n_ > b_->length / (W) - (uint64_t)o_)) { \
         c->err_c = n_; VMRT_RAISE(pc, VMRT_E_RANGE_FILL, o_, (W), b_); } \
       T v_ = (T)(value); uint8_t *p_ = b_->data + (uint64_t)o_ * (W); \
       for (int64_t i_ = 0; i_ < n_; i_++) memcpy(p_ + (uint64_t)i_ * (W), &v_, (W)); \
     } while (0)

#define VMRT_LENGTH(pc, dst, ref) \
  do { vmrt_ref *b_ = (ref); VMRT_BUFFER(pc, b_); (dst) = (int64_t)b_->length; } while (0)

static vmrt_ref *vmrt_buffer_new(uint64_t length) {
  vmrt_ref *r = (vmrt_ref *)calloc(1, sizeof(vmrt_ref));
  if (r == NULL) return NULL;
  r->data = (uint8_t *)calloc(length ? length : 1, 1);
  if (r->data == NULL) { free(r); return NULL; }
  r->kind = VMRT_KIND_BUFFER;
  r->is_mutable = 1;
  r->refcount = 0;
  r->length = length;
  r->host_id = -1;
  return r;
}

/* vm.buffer.alloc: alignment checked, then the length (as buffer.py does). */
#define VMRT_ALLOC(pc, dst, len, align) \
  do { int64_t n_ = (int64_t)(len); int32_t a_ = (int32_t)(align); \
       if (VMRT_UNLIKELY(a_ < 0 || (a_ & (a_ - 1)) != 0)) \
         VMRT_RAISE(pc, VMRT_E_ALIGNMENT, a_, 0, NULL); \
       if (VMRT_UNLIKELY(n_ < 0)) VMRT_RAISE(pc, VMRT_E_NEGATIVE_LENGTH, n_, 0, NULL); \
       int32_t m_ = c->host != NULL && c->meter_memory; \
       if (m_ && vmrt_charge_cb(c->host, n_)) \
         VMRT_RAISE(pc, VMRT_E_LIMIT, 0, 0, NULL); \
       vmrt_ref *r_ = vmrt_buffer_new((uint64_t)n_); \
       if (VMRT_UNLIKELY(r_ == NULL)) { \
         if (m_) vmrt_uncharge_cb(c->host, n_); \
         VMRT_RAISE(pc, VMRT_E_ALLOC, n_, 0, NULL); } \
       r_->charged = m_ ? c->host : NULL; \
       VMRT_SET_REF(dst, r_); } while (0)

/* Bytes [off, off + n) inside buffer b (n < 0 or off < 0 are out of range). */
#define VMRT_BYTE_RANGE(pc, b, off, n) \
  do { if (VMRT_UNLIKELY((off) < 0 || (n) < 0 || (uint64_t)(off) > (b)->length \
                         || (uint64_t)(n) > (b)->length - (uint64_t)(off))) \
         VMRT_RAISE(pc, VMRT_E_RANGE_BYTES, (off), (n), (b)); } while (0)

/* `name`: the operand's number in runtime.py's OPERAND_NAMES. */
#define VMRT_NAMED_BUFFER(pc, ref, name) \
  do { if (VMRT_UNLIKELY((ref) == NULL || (ref)->kind != VMRT_KIND_BUFFER)) \
         VMRT_RAISE(pc, VMRT_E_NULL_NAMED, (name), 0, (ref)); } while (0)

/* vm.buffer.copy: source range, target mutability, target range (buffer.py's order). */
#define VMRT_COPY(pc, src, soff, dst, doff, len) \
  do { vmrt_ref *s_ = (src), *d_ = (dst); int64_t so_ = (int64_t)(soff), \
       do_ = (int64_t)(doff), n_ = (int64_t)(len); \
       VMRT_NAMED_BUFFER(pc, s_, 0); VMRT_NAMED_BUFFER(pc, d_, 1); \
       VMRT_BYTE_RANGE(pc, s_, so_, n_); \
       if (VMRT_UNLIKELY(!d_->is_mutable)) VMRT_RAISE(pc, VMRT_E_READ_ONLY, 0, 0, d_); \
       VMRT_BYTE_RANGE(pc, d_, do_, n_); \
       if (n_) memmove(d_->data + do_, s_->data + so_, (size_t)n_); } while (0)

#define VMRT_COMPARE(pc, dst, lhs, loff, rhs, roff, len) \
  do { vmrt_ref *l_ = (lhs), *r_ = (rhs); int64_t lo_ = (int64_t)(loff), \
       ro_ = (int64_t)(roff), n_ = (int64_t)(len); \
       VMRT_NAMED_BUFFER(pc, l_, 2); VMRT_NAMED_BUFFER(pc, r_, 3); \
       VMRT_BYTE_RANGE(pc, l_, lo_, n_); VMRT_BYTE_RANGE(pc, r_, ro_, n_); \
       (dst) = n_ == 0 || memcmp(l_->data + lo_, r_->data + ro_, (size_t)n_) == 0; \
     } while (0)

/* vm.list.get.ref of a list of buffers (vmrt/vm/ctier/analysis.py admits no other). */
#define VMRT_LIST_GET_REF(pc, dst, list, index) \
  do { vmrt_ref *l_ = (list); int32_t i_ = (int32_t)(index); \
       if (VMRT_UNLIKELY(l_ == NULL)) VMRT_RAISE(pc, VMRT_E_NULL_REF, 0, 0, NULL); \
       if (VMRT_UNLIKELY(l_->kind != VMRT_KIND_LIST)) VMRT_RAISE(pc, VMRT_E_WRONG_REF, 0, 0, l_); \
       if (VMRT_UNLIKELY(i_ < 0 || (uint64_t)i_ >= l_->count)) \
         VMRT_RAISE(pc, VMRT_E_LIST_INDEX, i_, 0, l_); \
       VMRT_SET_REF(dst, l_->items[i_]); } while (0)

/* Globals: direct offsets are checked when the code is generated. */
#define VMRT_GLOBAL_LOAD(pc, T, dst, off) \
  do { int64_t o_ = (int64_t)(off); \
       if (VMRT_UNLIKELY(o_ < 0 || (uint64_t)o_ + sizeof(T) > c->inst->rw_size)) \
         VMRT_RAISE(pc, VMRT_E_GLOBAL_RANGE, o_, 0, NULL); \
       T v_; memcpy(&v_, c->inst->rw + o_, sizeof(T)); (dst) = v_; } while (0)
#define VMRT_GLOBAL_STORE(pc, T, value, off) \
  do { int64_t o_ = (int64_t)(off); \
       if (VMRT_UNLIKELY(o_ < 0 || (uint64_t)o_ + sizeof(T) > c->inst->rw_size)) \
         VMRT_RAISE(pc, VMRT_E_GLOBAL_RANGE, o_, 0, NULL); \
       T v_ = (value); memcpy(c->inst->rw + o_, &v_, sizeof(T)); } while (0)

/* -- integers (ops.h; numerics.py) ------------------------------------------------- */
#define VMRT_DIV_CHECK(pc, d) \
  do { if (VMRT_UNLIKELY((d) == 0)) VMRT_RAISE(pc, VMRT_E_DIV_ZERO, 0, 0, NULL); } while (0)

static inline int32_t vmrt_div_s32(int32_t a, int32_t b) {
  return b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b;
}
static inline int64_t vmrt_div_s64(int64_t a, int64_t b) {
  return b == -1 ? (int64_t)(0ull - (uint64_t)a) : a / b;
}
static inline int32_t vmrt_rem_s32(int32_t a, int32_t b) { return b == -1 ? 0 : a % b; }
static inline int64_t vmrt_rem_s64(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
static inline int32_t vmrt_ctlz32(int32_t a) {
  return a ? __builtin_clz((uint32_t)a) : 32;
}
static inline int32_t vmrt_ctlz64(int64_t a) {
  return a ? __builtin_clzll((uint64_t)a) : 64;
}

/* -- floats ------------------------------------------------------------------------ */
#define VMRT_DEFAULT_NAN (-(double)NAN) /* x86's "real indefinite" */

static inline float vmrt_f32_bits(uint32_t bits) { float f; memcpy(&f, &bits, 4); return f; }
static inline uint32_t vmrt_bits_f32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static inline double vmrt_f64_bits(uint64_t bits) { double f; memcpy(&f, &bits, 8); return f; }
static inline uint64_t vmrt_bits_f64(double f) { uint64_t b; memcpy(&b, &f, 8); return b; }

/* An f32 result of a double computation, narrowed as the Python tier's `F32` does:
   through memory, so the compiler cannot fold float -> double -> float into nothing
   (that conversion quiets a signalling NaN). */
static inline float vmrt_narrow(double x) {
  volatile double v = x;
  return (float)v;
}

static inline double vmrt_round_away(double x) {
  if (isnan(x) || isinf(x)) return x + x;
  double t = trunc(x);
  if (fabs(x - t) >= 0.5) t += x > 0 ? 1.0 : -1.0;
  return copysign(t, x);
}
static inline double vmrt_round_even(double x) {
  double r = vmrt_round_away(x);
  if (isnan(r) || isinf(r)) return r;
  if (fabs(x - r) == 0.5 && fmod(r, 2.0) != 0) r = r > 0.0 ? r - 1.0 : r + 1.0;
  return r;
}
/* lround/llround as the reference's x86-64 builds answer out of range: LONG_MIN. */
static inline int64_t vmrt_llround(double x) {
  if (isnan(x) || isinf(x)) return INT64_MIN;
  double r = vmrt_round_away(x);
  if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)r;
}
static inline int64_t vmrt_f32_to_ui64(float x) {
  double r = vmrt_round_away((double)x);
  if (isnan(r) || isinf(r) || !(r >= -9223372036854775808.0 && r < 18446744073709551616.0))
    return INT64_MIN;
  if (r >= 9223372036854775808.0) return (int64_t)(uint64_t)r;
  return (int64_t)r;
}
static inline double vmrt_ceil(double x) {
  if (isnan(x) || isinf(x)) return x + x;
  return copysign(ceil(x), x);
}
static inline double vmrt_floor(double x) {
  if (isnan(x) || isinf(x)) return x + x;
  return copysign(floor(x), x);
}
static inline double vmrt_log_domain(double x, double (*fn)(double)) {
  if (isnan(x)) return x;
  if (x == 0.0) return -INFINITY;
  if (x < 0.0) return NAN;
  if (isinf(x)) return INFINITY;
  return fn(x);
}
static inline double vmrt_log1p(double x) {
  if (isnan(x)) return x;
  if (x == -1.0) return -INFINITY;
  if (x < -1.0) return VMRT_DEFAULT_NAN;
  if (isinf(x)) return INFINITY;
  return log1p(x);
}
static inline double vmrt_sqrt(double x) {
  if (isnan(x) || (isinf(x) && x > 0)) return x;
  if (x < 0.0) return VMRT_DEFAULT_NAN;
  return sqrt(x);
}
static inline double vmrt_rsqrt(double x) {
  double s = vmrt_sqrt(x);
  return s == 0.0 ? copysign(INFINITY, s) : 1.0 / s;
}
static inline float vmrt_rsqrt_f32(float x) {
  float s = (float)vmrt_sqrt((double)x);
  return s == 0.0f ? copysignf(INFINITY, s) : (float)(1.0 / (double)s);
}
static inline double vmrt_trig(double x, double (*fn)(double)) {
  if (isnan(x)) return x;
  if (isinf(x)) return VMRT_DEFAULT_NAN;
  return fn(x);
}
static inline double vmrt_remainder(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
  if (isinf(a) || b == 0.0) return VMRT_DEFAULT_NAN;
  if (isinf(b)) return a;
  return remainder(a, b);
}
static inline double vmrt_atan2(double y, double x) {
  if (isnan(y) || isnan(x)) return isnan(y) ? y : x;
  return atan2(y, x);
}
static inline double vmrt_pow(double b, double e) {
  /* math.pow's answers: C99's, with its domain errors as the default NaN. */
  if (b == 0.0 && e < 0.0 && isfinite(e)) {
    int odd = e == floor(e) && fmod(e, 2.0) != 0.0;
    return odd ? copysign(INFINITY, b) : INFINITY;
  }
  if (isfinite(b) && isfinite(e) && b < 0.0 && e != floor(e)) return VMRT_DEFAULT_NAN;
  return pow(b, e);
}
static inline float vmrt_fma_f32(float a, float b, float c) {
  float p = a * b; /* two roundings (no contraction: build.py), as upstream */
  return p + c;
}

/* -- limits ------------------------------------------------------------------------- */
/* The host's refill (vmrt/vm/ctier/runtime.py, cffi `extern "Python"`): takes fuel
   from the budget and looks at the deadline and cancellation; 1: the call stops. */
VMRT_INTERNAL int32_t vmrt_refill_cb(vmrt_ctx *c, int64_t cost);

/* Fuel of a call without limits (no host) between two looks at Ctrl-C: it never runs
   out, a slice ends only to look. */
#define VMRT_UNLIMITED_SLICE (INT64_C(1) << 24)
#define VMRT_SLICE_LIMIT 1  /* the host's refill stopped the call */
#define VMRT_SLICE_CTRL_C 2 /* Ctrl-C was pressed since the call came in */

/* A slice of fuel ran out (a block of `cost` about to run): 0, the next slice is in
   c->fuel, or why the call stops (the block does not run: its cost is given back). */
static int32_t vmrt_slice_end(vmrt_ctx *c, int64_t cost) {
  if (VMRT_CTRL_C_PRESSED(c)) {
    c->fuel += cost;
    return VMRT_SLICE_CTRL_C;
  }
  if (c->ctrl_c_watch != NULL) c->ctrl_c_watch(); /* (a handler set since: counted again) */
  if (c->host == NULL) {
    c->fuel += VMRT_UNLIMITED_SLICE;
    return 0;
  }
  return vmrt_refill_cb(c, cost) ? VMRT_SLICE_LIMIT : 0;
}

/* A block about to run charges its cost; below zero a slice ended (rarely). */
#define VMRT_CHARGE(pc, cost) \
  do { c->fuel -= (cost); \
       if (VMRT_UNLIKELY(c->fuel < 0)) { \
         int32_t s_ = vmrt_slice_end(c, (cost)); \
         if (s_) VMRT_RAISE(pc, s_ == VMRT_SLICE_CTRL_C ? VMRT_E_CTRL_C : VMRT_E_LIMIT, \
                            0, 0, NULL); } } while (0)
