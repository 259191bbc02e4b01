/* Byte-range copy and fill used by vm.buffer and, later, batched span copies. */
#include "vmrt_memory.h"

#include <string.h>

void vmrt_copy_bytes(uint8_t* target, const uint8_t* source, size_t length) {
  if (length) memmove(target, source, length);
}

void vmrt_fill_pattern(uint8_t* target, size_t length, const uint8_t* pattern,
                       size_t pattern_length) {
  if (!length) return;
  if (pattern_length == 1) {
    memset(target, pattern[0], length);
    return;
  }
  /* Seed one copy of the pattern, then double the filled prefix: log2(n)
   * memcpy calls instead of n / pattern_length small stores. */
  memcpy(target, pattern, pattern_length);
  size_t filled = pattern_length;
  while (filled < length) {
    size_t chunk = filled < length - filled ? filled : length - filled;
    memcpy(target + filled, target, chunk);
    filled += chunk;
  }
}

/* How much of the next span's source copy_spans prefetches (16 lines). */
#define VMRT_PREFETCH_BYTES 1024

/* True when [offset, offset + length) lies inside a buffer of |size| bytes. */
static int vmrt_range_ok(int64_t offset, int64_t length, int64_t size) {
  return offset >= 0 && length >= 0 && offset <= size && length <= size - offset;
}

int64_t vmrt_copy_spans(uint8_t* target, int64_t target_size,
                        const uint8_t* source, int64_t source_size,
                        const int64_t* spans, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 3 * i;
    if (!vmrt_range_ok(s[0], s[2], target_size) ||
        !vmrt_range_ok(s[1], s[2], source_size)) {
      return i;
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 3 * i;
    if (i + 1 < count) {
      /* Spans usually start on a page the hardware prefetcher has not seen
       * (it stops at page boundaries): ask for the next span's first lines
       * while this one copies. */
      const int64_t* next = s + 3;
      const uint8_t* from = source + next[1];
      int64_t ahead = next[2] < VMRT_PREFETCH_BYTES ? next[2] : VMRT_PREFETCH_BYTES;
      for (int64_t k = 0; k < ahead; k += 64) __builtin_prefetch(from + k, 0, 3);
    }
    if (s[2]) memmove(target + s[0], source + s[1], (size_t)s[2]);
  }
  return -1;
}

int64_t vmrt_fill_spans(uint8_t* target, int64_t target_size,
                        const int64_t* spans, int64_t count,
                        const uint8_t* pattern, int64_t pattern_length) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 2 * i;
    if (!vmrt_range_ok(s[0], s[1], target_size) || s[1] % pattern_length) {
      return i;
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 2 * i;
    vmrt_fill_pattern(target + s[0], (size_t)s[1], pattern,
                      (size_t)pattern_length);
  }
  return -1;
}

int64_t vmrt_compare_spans(const uint8_t* lhs, int64_t lhs_size,
                           const uint8_t* rhs, int64_t rhs_size,
                           const int64_t* spans, int64_t count,
                           int64_t* out_mismatch) {
  *out_mismatch = -1;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 3 * i;
    if (!vmrt_range_ok(s[0], s[2], lhs_size) ||
        !vmrt_range_ok(s[1], s[2], rhs_size)) {
      return i;
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* s = spans + 3 * i;
    if (s[2] && memcmp(lhs + s[0], rhs + s[1], (size_t)s[2]) != 0) {
      *out_mismatch = i;
      break;
    }
  }
  return -1;
}
