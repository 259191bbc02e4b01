/* Byte-range primitives behind vmrt.memory: copy and pattern fill.
 * Callers (vmrt/memory.py) check every range before calling; these functions
 * trust their arguments so that the hot path carries no second set of checks. */
#ifndef VMRT_MEMORY_H_
#define VMRT_MEMORY_H_

#include <stddef.h>
#include <stdint.h>

/* Copies |length| bytes; the ranges may overlap (memmove semantics). */
void vmrt_copy_bytes(uint8_t* target, const uint8_t* source, size_t length);

/* Fills |length| bytes of |target| by repeating |pattern| (1..16 bytes).
 * |length| must be a multiple of |pattern_length|. */
void vmrt_fill_pattern(uint8_t* target, size_t length, const uint8_t* pattern,
                       size_t pattern_length);

/* Batched span operations (one call for many ranges; the caller releases the
 * GIL around them). |spans| holds |count| records of int64_t fields. Every
 * span is checked before any byte is touched: the result is -1 when all are
 * in range (and the operation was done), else the index of the first bad span
 * (and nothing was done). A span is bad when an offset or length is negative,
 * a range leaves its buffer or (fill) the length is not a multiple of the
 * pattern. */

/* Records (target_offset, source_offset, length); memmove per span, in order. */
int64_t vmrt_copy_spans(uint8_t* target, int64_t target_size,
                        const uint8_t* source, int64_t source_size,
                        const int64_t* spans, int64_t count);

/* Records (offset, length); |pattern| is 1..16 bytes. */
int64_t vmrt_fill_spans(uint8_t* target, int64_t target_size,
                        const int64_t* spans, int64_t count,
                        const uint8_t* pattern, int64_t pattern_length);

/* Records (lhs_offset, rhs_offset, length). On success stores in
 * |out_mismatch| the index of the first span whose bytes differ, or -1. */
int64_t vmrt_compare_spans(const uint8_t* lhs, int64_t lhs_size,
                           const uint8_t* rhs, int64_t rhs_size,
                           const int64_t* spans, int64_t count,
                           int64_t* out_mismatch);

#endif /* VMRT_MEMORY_H_ */
