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
