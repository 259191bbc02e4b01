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

#define VMRT_MAX_SOURCES 1024

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
 * little-endian 64-bit integers. Returns the bytes written, -1 when the directory
 * or an entry cannot be read, -2 when `capacity` or VMRT_MAX_SOURCES is too small;
 * `*out_count` gets how many records were written. */
int64_t vmrt_source_records(const char* directory, unsigned char* out, int64_t capacity,
                            int64_t* out_count) {
  DIR* dir = opendir(directory);
  if (dir == NULL) return -1;
  char* names[VMRT_MAX_SOURCES];
  size_t count = 0;
  int64_t result = 0;
  *out_count = 0;
  if (capacity < 0) capacity = 0;
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    if (!vmrt_is_source(entry->d_name)) continue;
    if (count == VMRT_MAX_SOURCES) { result = -2; break; }
    names[count] = strdup(entry->d_name);
    if (names[count] == NULL) { result = -1; break; }
    ++count;
  }
  if (result == 0) qsort(names, count, sizeof(names[0]), vmrt_compare_names);
  for (size_t i = 0; i < count && result >= 0; ++i) {
    struct stat st;
    size_t length = strlen(names[i]) + 1;
    if (fstatat(dirfd(dir), names[i], &st, 0) != 0) {
      result = -1;
    } else if ((uint64_t)capacity - (uint64_t)result < length + 16) {
      result = -2;
    } else {
      memcpy(out + result, names[i], length);
      vmrt_put_u64(out + result + length, (uint64_t)st.st_size);
      vmrt_put_u64(out + result + length + 8,
                   (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec);
      result += (int64_t)(length + 16);
      ++*out_count;
    }
  }
  for (size_t i = 0; i < count; ++i) free(names[i]);
  closedir(dir);
  return result;
}
