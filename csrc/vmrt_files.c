/* The name, size and modification time of a directory's Python sources in one call
 * (vmrt/vm/code_cache.py, source_records): the code cache's runtime fingerprint stats
 * ~40 files in every new process, and doing it from Python costs several times the
 * system calls themselves. The Python twin there builds the same bytes. */

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int vmrt_is_source(const char* name) {
  size_t length = strlen(name);
  return (length >= 3 && strcmp(name + length - 3, ".py") == 0) ||
         (length >= 4 && strcmp(name + length - 4, ".pyc") == 0);
}

static int vmrt_compare_names(const void* lhs, const void* rhs) {
  return strcmp(*(const char* const*)lhs, *(const char* const*)rhs);
}

static void vmrt_put_u64(unsigned char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = (unsigned char)(value >> (8 * i));
}

/* Writes, for each entry of `directory` named *.py or *.pyc in name (byte) order,
 * its name, a NUL, then its size and st_mtime_ns (following symlinks) as
 * little-endian 64-bit integers, and sets `*out_count` to how many. Returns the
 * bytes written; -1 when the directory or an entry cannot be read (or memory runs
 * out); -2 when they do not fit in `capacity`, `*out_count` then being the bytes
 * they need. */
int64_t vmrt_source_records(const char* directory, unsigned char* out, int64_t capacity,
                            int64_t* out_count) {
  *out_count = 0;
  DIR* dir = opendir(directory);
  if (dir == NULL) return -1;
  char** names = NULL;
  size_t count = 0, room = 0;
  int failed = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    if (!vmrt_is_source(entry->d_name)) continue;
    if (count == room) {
      char** grown = (char**)realloc(names, (room = room ? 2 * room : 64) * sizeof(char*));
      if (grown == NULL) { failed = 1; break; }
      names = grown;
    }
    if ((names[count] = strdup(entry->d_name)) == NULL) { failed = 1; break; }
    ++count;
  }
  if (!failed && count > 1) qsort(names, count, sizeof(names[0]), vmrt_compare_names);
  uint64_t used = 0, limit = capacity > 0 ? (uint64_t)capacity : 0;
  for (size_t i = 0; i < count && !failed; ++i) {
    struct stat st;
    size_t length = strlen(names[i]) + 1;
    if (fstatat(dirfd(dir), names[i], &st, 0) != 0) {
      failed = 1;
    } else {
      if (used + length + 16 <= limit) {
        memcpy(out + used, names[i], length);
        vmrt_put_u64(out + used + length, (uint64_t)st.st_size);
        vmrt_put_u64(out + used + length + 8,
                     (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec);
      }
      used += length + 16;
    }
  }
  for (size_t i = 0; i < count; ++i) free(names[i]);
  free(names);
  closedir(dir);
  if (failed) return -1;
  if (used > limit) { *out_count = (int64_t)used; return -2; }
  *out_count = (int64_t)count;
  return (int64_t)used;
}
