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

#endif /* VMRT_MEMORY_H_ */
