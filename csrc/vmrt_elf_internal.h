/* Internals of vmrt's ELF loader shared by its files (vmrt_elf.c: mapping,
 * relocation, symbols; vmrt_elf_headers.c: the header and program-header
 * checks; vmrt_elf_system.c: what images for the system loader must also
 * pass). Only included on x86-64 Linux. */
#ifndef VMRT_ELF_INTERNAL_H_
#define VMRT_ELF_INTERNAL_H_

#include "vmrt_elf.h"

#include <string.h>
#include <sys/mman.h>

enum {
  VMRT_ELF_INVALID = 3,
  VMRT_ELF_NOT_FOUND = 5,
  VMRT_ELF_EXHAUSTED = 8,
  VMRT_ELF_UNAVAILABLE = 14,
  VMRT_ELF_INCOMPATIBLE = 18,
};

/* Record sizes of ELF64 structures. */
#define EHDR_SIZE 64u
#define PHDR_SIZE 56u
#define DYN_SIZE 16u
#define SYM_SIZE 24u
#define RELA_SIZE 24u

/* Limits far beyond what iree-compile emits, there so that hostile sizes
 * cannot make the loader reserve, walk or compare without bound. */
#define MAX_SPAN ((uint64_t)1 << 30)
#define MAX_ALIGN ((uint64_t)1 << 26)
#define MAX_LOADS 64u
#define MAX_SYMBOLS ((uint64_t)1 << 20)

enum {
  PT_LOAD_ = 1, PT_DYNAMIC_ = 2, PT_NOTE_ = 4, PT_PHDR_ = 6, PT_TLS_ = 7,
  PT_GNU_EH_FRAME_ = 0x6474e550, PT_GNU_STACK_ = 0x6474e551, PT_GNU_RELRO_ = 0x6474e552,
  PT_GNU_PROPERTY_ = 0x6474e553,
};
enum { PF_X_ = 1, PF_W_ = 2, PF_R_ = 4 };
enum {
  DT_NULL_ = 0, DT_NEEDED_ = 1, DT_PLTRELSZ_ = 2, DT_HASH_ = 4, DT_STRTAB_ = 5, DT_SYMTAB_ = 6,
  DT_RELA_ = 7, DT_RELASZ_ = 8, DT_RELAENT_ = 9, DT_STRSZ_ = 10,
  DT_SYMENT_ = 11, DT_INIT_ = 12, DT_FINI_ = 13, DT_REL_ = 17, DT_RELSZ_ = 18,
  DT_PLTREL_ = 20, DT_JMPREL_ = 23, DT_INIT_ARRAY_ = 25,
  DT_FINI_ARRAY_ = 26, DT_INIT_ARRAYSZ_ = 27, DT_FINI_ARRAYSZ_ = 28, DT_RELRSZ_ = 35, DT_RELR_ = 36,
  DT_TRACKED = 37, /* tags below this are kept in elf_load_t.dyn */
};
#define DT_GNU_HASH_ 0x6ffffef5u
enum { SHN_UNDEF_ = 0, SHN_ABS_ = 0xfff1, SHN_COMMON_ = 0xfff2 };
enum { STB_GLOBAL_ = 1, STB_WEAK_ = 2 };
enum { STT_NOTYPE_ = 0, STT_FUNC_ = 2 };
enum { STV_DEFAULT_ = 0, STV_PROTECTED_ = 3 };
enum {
  R_NONE = 0, R_64 = 1, R_PC32 = 2, R_COPY = 5, R_GLOB_DAT = 6,
  R_JUMP_SLOT = 7, R_RELATIVE = 8, R_32 = 10, R_32S = 11,
};

/* What a range lookup requires of the segment holding it. */
enum { NEED_ANY = 0, NEED_READ = 1, NEED_EXEC = 2, NEED_WRITE = 3 };

typedef struct {
  uint32_t type, flags;
  uint64_t offset, vaddr, filesz, memsz, align;
} elf_phdr_t;

/* A PT_LOAD segment with memsz > 0, in link-time addresses. */
typedef struct {
  uint64_t vaddr, memsz, offset, filesz;
  uint32_t flags;
} elf_seg_t;

typedef struct {
  uint32_t name;
  uint8_t info, other;
  uint16_t shndx;
  uint64_t value, size;
} elf_sym_t;

struct vmrt_elf_module {
  uintptr_t base; /* the reservation, page aligned */
  size_t size;
  uintptr_t bias; /* runtime address = bias + link-time address (mod 2^64) */
  size_t seg_count;
  elf_seg_t segs[MAX_LOADS];
  uint64_t symtab, sym_count; /* .dynsym, link-time address and entries */
  uint64_t strtab, strsz;     /* .dynstr */
  /* Where the image says functions are (vmrt_elf_functions.c), link-time, by
   * start; reach[i] is the largest end among the first i+1. Heap arrays, count 0
   * when the image lists no function; complete when every function is listed. */
  uint64_t* func_start;
  uint64_t* func_end;
  uint64_t* func_reach;
  size_t func_count;
  int func_complete;
  int owns_mapping; /* 0 once detached: the span is another loader's */
  size_t span; /* bytes from the lowest to the highest segment page */
};

/* Everything learnt while loading; discarded afterwards. */
typedef struct {
  const uint8_t* data;
  size_t size;
  uint32_t flags; /* VMRT_ELF_LOAD_* */
  char* error;
  size_t error_capacity;
  uint64_t phoff;
  uint32_t phnum;
  uint64_t page, max_align;
  uint64_t vmin, vmax; /* page-aligned link-time span */
  int have_dynamic, have_relro;
  uint64_t dyn_vaddr, dyn_size, relro_vaddr, relro_size;
  uint64_t dyn[DT_TRACKED];
  uint64_t dyn_seen; /* bit t set when tag t < DT_TRACKED appeared */
  int have_gnu_hash;
  uint64_t gnu_hash;
  vmrt_elf_module_t* m;
} elf_load_t;


/* Writes the message into the error buffer; returns code. */
int elf_fail(elf_load_t* s, int code, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

static inline uint16_t rd16(const uint8_t* p) { uint16_t v; memcpy(&v, p, sizeof v); return v; }
static inline uint32_t rd32(const uint8_t* p) { uint32_t v; memcpy(&v, p, sizeof v); return v; }
static inline uint64_t rd64(const uint8_t* p) { uint64_t v; memcpy(&v, p, sizeof v); return v; }

static inline uint64_t page_down(uint64_t v, uint64_t page) { return v & ~(page - 1); }
/* Callers guarantee v + page - 1 does not wrap (checked when segments parse). */
static inline uint64_t page_up(uint64_t v, uint64_t page) { return (v + page - 1) & ~(page - 1); }
static inline int dyn_has(const elf_load_t* s, unsigned tag) {
  return (int)((s->dyn_seen >> tag) & 1u);
}
static inline unsigned long long ull(uint64_t v) { return (unsigned long long)v; }

static inline int seg_prot(uint32_t flags) {
  /* As IREE does: write or execute permission implies read. */
  int prot = (flags & (PF_R_ | PF_W_ | PF_X_)) ? PROT_READ : PROT_NONE;
  if (flags & PF_W_) prot |= PROT_WRITE;
  if (flags & PF_X_) prot |= PROT_EXEC;
  return prot;
}

/* Index of the segment holding link-time [vaddr, vaddr+len) whole, or -1. */
static inline int seg_find(const vmrt_elf_module_t* m, uint64_t vaddr, uint64_t len, int need) {
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    if (need == NEED_READ && seg_prot(g->flags) == PROT_NONE) continue;
    if (need == NEED_EXEC && !(g->flags & PF_X_)) continue;
    if (need == NEED_WRITE && !(g->flags & PF_W_)) continue;
    if (vaddr < g->vaddr || len > g->memsz || vaddr - g->vaddr > g->memsz - len) continue;
    return (int)i;
  }
  return -1;
}

/* Only called on ranges seg_find accepted, which are mapped and readable. */
static inline void img_read(const vmrt_elf_module_t* m, uint64_t vaddr, void* out, size_t n) {
  memcpy(out, (const void*)(uintptr_t)(m->bias + vaddr), n);
}

static inline void read_sym(const vmrt_elf_module_t* m, uint64_t index, elf_sym_t* sym) {
  uint8_t raw[SYM_SIZE];
  img_read(m, m->symtab + index * SYM_SIZE, raw, sizeof raw);
  sym->name = rd32(raw);
  sym->info = raw[4];
  sym->other = raw[5];
  sym->shndx = rd16(raw + 6);
  sym->value = rd64(raw + 8);
  sym->size = rd64(raw + 16);
}

/* A printable copy of a symbol's name for messages, bounded by .dynstr (whose
 * bytes relocations could have rewritten, so no terminator is assumed). */
static inline void sym_name(const vmrt_elf_module_t* m, uint32_t name, char* out, size_t cap) {
  size_t n = 0;
  if (name < m->strsz) {
    const char* p = (const char*)(uintptr_t)(m->bias + m->strtab + name);
    uint64_t avail = m->strsz - name;
    for (; n + 1 < cap && n < avail && p[n]; ++n) {
      unsigned char c = (unsigned char)p[n];
      out[n] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
  }
  out[n] = '\0';
}


/* vmrt_elf_headers.c: the checks of the file's headers and program headers
 * (segments recorded in s->m). */
int elf_check_headers(elf_load_t* s);
/* A load's state over `data` with nothing checked yet (the error text emptied). */
void elf_state_init(elf_load_t* s, const uint8_t* data, size_t size, uint32_t flags,
                    char* error, size_t error_capacity);
void elf_read_phdr(const elf_load_t* s, uint32_t index, elf_phdr_t* p);
/* The section header table when usable (inside the file, 64-byte entries): 1 and
 * its offset and count, else 0. Sections are optional and never loaded: an
 * unusable table is ignored, never a reason to refuse. */
#define SHDR_SIZE 64u
int elf_section_table(const elf_load_t* s, uint64_t* shoff, uint32_t* shnum);

/* vmrt_elf_functions.c: where the image says its functions are. */
int elf_read_functions(elf_load_t* s);
/* Whether link-time `vaddr` may be entered: inside an executable segment's file
 * bytes (which are all of it), at a listed function's start (complete list; of
 * `size` bytes when that is not 0: a symbol's own size) or not strictly inside a
 * listed function (partial list). */
int elf_is_entry(const vmrt_elf_module_t* m, uint64_t vaddr, uint64_t size);

/* vmrt_elf_system.c: what an image for the system loader must also pass, once
 * loaded and relocated here (VMRT_ELF_LOAD_FOR_SYSTEM). */
int elf_check_for_system(elf_load_t* s);

/* vmrt_elf.c, for vmrt_elf_system.c. */
int elf_check_entries(elf_load_t* s, unsigned fn_tag, unsigned array_tag, unsigned size_tag,
                      const char* fn_name, const char* array_name);
int elf_gnu_hash_count(elf_load_t* s, uint64_t* out);

#endif /* VMRT_ELF_INTERNAL_H_ */
