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

/* -- the records of several directories, on a thread of its own ---------------------------
 * A new process stats ~40 sources for the fingerprint (~0.25 ms of system calls here)
 * before its first cache lookup; vmrt/vm/code_cache.py starts this at import, so the
 * stats run beside whatever the process does first. The thread holds no Python state
 * and never needs the GIL; one job per process (the Python side starts one, and a
 * fork's child, which inherits the state but not the thread, never waits on it). */
#include <pthread.h>

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t done_signal;
  int state; /* 0: none, 1: running, 2: done, 3: taken */
  char* directories; /* NUL-separated, ending with an empty name */
  unsigned char* records;
  int64_t used; /* bytes of records (-1: a directory or entry could not be read) */
  int64_t count;
} vmrt_records_job_t;

static vmrt_records_job_t vmrt_records_job = {PTHREAD_MUTEX_INITIALIZER,
                                              PTHREAD_COND_INITIALIZER, 0, NULL, NULL, 0, 0};

/* Appends one directory's records to the job's (growing them as asked); a directory
 * that cannot be read adds none, as it adds none to the fingerprint. */
static int vmrt_records_append(vmrt_records_job_t* job, const char* directory, int64_t* room) {
  for (;;) {
    int64_t count = 0;
    int64_t written = vmrt_source_records(directory, job->records + job->used,
                                          *room - job->used, &count);
    if (written >= 0) {
      job->used += written;
      job->count += count;
      return 0;
    }
    if (written == -1) return 0;
    int64_t grown_room = job->used + count + 4096;
    unsigned char* grown = (unsigned char*)realloc(job->records, (size_t)grown_room);
    if (grown == NULL) return -1;
    job->records = grown;
    *room = grown_room;
  }
}

static void* vmrt_records_run(void* arg) {
  vmrt_records_job_t* job = (vmrt_records_job_t*)arg;
  int64_t room = 1 << 14;
  job->records = (unsigned char*)malloc((size_t)room);
  int failed = job->records == NULL;
  for (const char* name = job->directories; !failed && *name; name += strlen(name) + 1) {
    failed = vmrt_records_append(job, name, &room) != 0;
  }
  pthread_mutex_lock(&job->lock);
  if (failed) job->used = -1;
  job->state = 2;
  pthread_cond_broadcast(&job->done_signal);
  pthread_mutex_unlock(&job->lock);
  return NULL;
}

/* Starts the job over `length` bytes of NUL-terminated directory names. Returns 0,
 * or -1 when a job was started before or the thread cannot be made. */
int vmrt_records_start(const char* directories, int64_t length) {
  vmrt_records_job_t* job = &vmrt_records_job;
  pthread_mutex_lock(&job->lock);
  int result = -1;
  if (job->state == 0 && length >= 0 &&
      (job->directories = (char*)calloc((size_t)length + 2, 1)) != NULL) {
    memcpy(job->directories, directories, (size_t)length);
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) == 0) {
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&thread, &attr, vmrt_records_run, job) == 0) {
        job->state = 1;
        result = 0;
      }
      pthread_attr_destroy(&attr);
    }
    if (result != 0) {
      free(job->directories);
      job->directories = NULL;
    }
  }
  pthread_mutex_unlock(&job->lock);
  return result;
}

/* Waits for the job and takes its records: copies them to `out` and returns their
 * length, `*out_count` the entries; -1 when there is no job to take (none started,
 * or taken) or it failed; -2 when they do not fit in `capacity` (`*out_count` then
 * says how many bytes they need, and they stay to be taken). */
int64_t vmrt_records_take(unsigned char* out, int64_t capacity, int64_t* out_count) {
  vmrt_records_job_t* job = &vmrt_records_job;
  pthread_mutex_lock(&job->lock);
  while (job->state == 1) pthread_cond_wait(&job->done_signal, &job->lock);
  int64_t result = -1;
  if (job->state == 2 && job->used >= 0 && job->used > capacity) {
    *out_count = job->used;
    result = -2;
  } else if (job->state == 2) {
    if (job->used >= 0) {
      if (job->used) memcpy(out, job->records, (size_t)job->used);
      *out_count = job->count;
      result = job->used;
    }
    free(job->records);
    free(job->directories);
    job->records = NULL;
    job->directories = NULL;
    job->state = 3;
  }
  pthread_mutex_unlock(&job->lock);
  return result;
}
