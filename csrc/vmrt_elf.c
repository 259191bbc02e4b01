/* ELF loader for IREE's embedded-elf-x86_64 executables (see vmrt_elf.h).
 *
 * The image is untrusted input: every value read from it is range-checked
 * before it is used as an offset, size or address, all arithmetic on such
 * values is unsigned and overflow-checked, and every multi-byte field is read
 * with memcpy (input and image may be unaligned). The steps follow IREE's own
 * loader (runtime/src/iree/hal/local/elf): reserve one PROT_NONE span, copy
 * PT_LOAD segments in read-write, parse PT_DYNAMIC, refuse imports, apply
 * RELA/JMPREL relocations, set final protections (never write+execute), make
 * PT_GNU_RELRO read-only, then run DT_INIT and DT_INIT_ARRAY. */
#define _DEFAULT_SOURCE 1

#include "vmrt_elf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  VMRT_ELF_INVALID = 3,
  VMRT_ELF_NOT_FOUND = 5,
  VMRT_ELF_EXHAUSTED = 8,
  VMRT_ELF_UNAVAILABLE = 14,
  VMRT_ELF_INCOMPATIBLE = 18,
};

#if defined(__x86_64__) && defined(__linux__)

#include <sys/mman.h>
#include <unistd.h>

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

enum { PT_LOAD_ = 1, PT_DYNAMIC_ = 2, PT_TLS_ = 7, PT_GNU_RELRO_ = 0x6474e552 };
enum { PF_X_ = 1, PF_W_ = 2, PF_R_ = 4 };
enum {
  DT_NULL_ = 0, DT_PLTRELSZ_ = 2, DT_HASH_ = 4, DT_STRTAB_ = 5, DT_SYMTAB_ = 6,
  DT_RELA_ = 7, DT_RELASZ_ = 8, DT_RELAENT_ = 9, DT_STRSZ_ = 10,
  DT_SYMENT_ = 11, DT_INIT_ = 12, DT_REL_ = 17, DT_RELSZ_ = 18,
  DT_PLTREL_ = 20, DT_JMPREL_ = 23, DT_INIT_ARRAY_ = 25,
  DT_INIT_ARRAYSZ_ = 27, DT_RELRSZ_ = 35, DT_RELR_ = 36,
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
enum { NEED_ANY = 0, NEED_READ = 1, NEED_EXEC = 2 };

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
  uint64_t value;
} elf_sym_t;

struct vmrt_elf_module {
  uintptr_t base; /* the reservation, page aligned */
  size_t size;
  uintptr_t bias; /* runtime address = bias + link-time address (mod 2^64) */
  size_t seg_count;
  elf_seg_t segs[MAX_LOADS];
  uint64_t symtab, sym_count; /* .dynsym, link-time address and entries */
  uint64_t strtab, strsz;     /* .dynstr */
};

/* Everything learnt while loading; discarded afterwards. */
typedef struct {
  const uint8_t* data;
  size_t size;
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

static int fail(elf_load_t* s, int code, const char* format, ...) {
  if (s->error && s->error_capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(s->error, s->error_capacity, format, args);
    va_end(args);
  }
  return code;
}

static uint16_t rd16(const uint8_t* p) { uint16_t v; memcpy(&v, p, sizeof v); return v; }
static uint32_t rd32(const uint8_t* p) { uint32_t v; memcpy(&v, p, sizeof v); return v; }
static uint64_t rd64(const uint8_t* p) { uint64_t v; memcpy(&v, p, sizeof v); return v; }

static uint64_t page_down(uint64_t v, uint64_t page) { return v & ~(page - 1); }
/* Callers guarantee v + page - 1 does not wrap (checked when segments parse). */
static uint64_t page_up(uint64_t v, uint64_t page) { return (v + page - 1) & ~(page - 1); }
static int dyn_has(const elf_load_t* s, unsigned tag) { return (int)((s->dyn_seen >> tag) & 1u); }
static unsigned long long ull(uint64_t v) { return (unsigned long long)v; }

static int seg_prot(uint32_t flags) {
  /* As IREE does: write or execute permission implies read. */
  int prot = (flags & (PF_R_ | PF_W_ | PF_X_)) ? PROT_READ : PROT_NONE;
  if (flags & PF_W_) prot |= PROT_WRITE;
  if (flags & PF_X_) prot |= PROT_EXEC;
  return prot;
}

/* Index of the segment holding link-time [vaddr, vaddr+len) whole, or -1. */
static int seg_find(const vmrt_elf_module_t* m, uint64_t vaddr, uint64_t len, int need) {
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    if (need == NEED_READ && seg_prot(g->flags) == PROT_NONE) continue;
    if (need == NEED_EXEC && !(g->flags & PF_X_)) continue;
    if (vaddr < g->vaddr || len > g->memsz || vaddr - g->vaddr > g->memsz - len) continue;
    return (int)i;
  }
  return -1;
}

/* Only called on ranges seg_find accepted, which are mapped and readable. */
static void img_read(const vmrt_elf_module_t* m, uint64_t vaddr, void* out, size_t n) {
  memcpy(out, (const void*)(uintptr_t)(m->bias + vaddr), n);
}

static void read_sym(const vmrt_elf_module_t* m, uint64_t index, elf_sym_t* sym) {
  uint8_t raw[SYM_SIZE];
  img_read(m, m->symtab + index * SYM_SIZE, raw, sizeof raw);
  sym->name = rd32(raw);
  sym->info = raw[4];
  sym->other = raw[5];
  sym->shndx = rd16(raw + 6);
  sym->value = rd64(raw + 8);
}

/* A printable copy of a symbol's name for messages, bounded by .dynstr (whose
 * bytes relocations could have rewritten, so no terminator is assumed). */
static void sym_name(const vmrt_elf_module_t* m, uint32_t name, char* out, size_t cap) {
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

/*---------------------------------------------------------------------------
 * Headers
 *---------------------------------------------------------------------------*/

static int check_ident(elf_load_t* s) {
  const uint8_t* d = s->data;
  if (s->size < EHDR_SIZE) {
    return fail(s, VMRT_ELF_INVALID, "%zu bytes is shorter than an ELF64 header (64)", s->size);
  }
  if (memcmp(d, "\x7f" "ELF", 4) != 0) return fail(s, VMRT_ELF_INVALID, "no \\x7fELF magic");
  if (d[4] == 1) {
    return fail(s, VMRT_ELF_INCOMPATIBLE, "32-bit ELF (ELFCLASS32); x86-64 needs ELFCLASS64");
  }
  if (d[4] != 2) return fail(s, VMRT_ELF_INVALID, "unknown ELF class %u", d[4]);
  if (d[5] == 2) {
    return fail(s, VMRT_ELF_INCOMPATIBLE, "big-endian ELF; x86-64 is little-endian");
  }
  if (d[5] != 1) return fail(s, VMRT_ELF_INVALID, "unknown ELF data encoding %u", d[5]);
  if (d[6] != 1) return fail(s, VMRT_ELF_INVALID, "ELF identification version %u, not 1", d[6]);
  return 0;
}

static int check_ehdr(elf_load_t* s) {
  int rc = check_ident(s);
  if (rc) return rc;
  const uint8_t* d = s->data;
  uint16_t type = rd16(d + 16), machine = rd16(d + 18);
  if (rd32(d + 20) != 1) return fail(s, VMRT_ELF_INVALID, "ELF version %u, not 1", rd32(d + 20));
  if (machine != 62) {
    return fail(s, VMRT_ELF_INCOMPATIBLE, "ELF machine %u is not x86-64 (62)", machine);
  }
  if (type != 3) {
    return fail(s, VMRT_ELF_INVALID, "ELF type %u is not a shared object (ET_DYN)", type);
  }
  if (rd16(d + 52) != EHDR_SIZE || rd16(d + 54) != PHDR_SIZE) {
    return fail(s, VMRT_ELF_INVALID, "header size %u / program header size %u, not 64 / 56",
                rd16(d + 52), rd16(d + 54));
  }
  s->phoff = rd64(d + 32);
  s->phnum = rd16(d + 56);
  /* 0xffff (PN_XNUM) would move the count into section 0: never emitted here. */
  if (s->phnum == 0 || s->phnum == 0xffff) {
    return fail(s, VMRT_ELF_INVALID, "program header count %u unsupported", s->phnum);
  }
  if (s->phoff > s->size || (uint64_t)s->phnum * PHDR_SIZE > s->size - s->phoff) {
    return fail(s, VMRT_ELF_INVALID, "program headers (offset %llu, %u entries) lie outside "
                "the %zu-byte image", ull(s->phoff), s->phnum, s->size);
  }
  return 0;
}

static void read_phdr(const elf_load_t* s, uint32_t index, elf_phdr_t* p) {
  const uint8_t* r = s->data + s->phoff + (uint64_t)index * PHDR_SIZE;
  p->type = rd32(r);
  p->flags = rd32(r + 4);
  p->offset = rd64(r + 8);
  p->vaddr = rd64(r + 16);
  p->filesz = rd64(r + 32);
  p->memsz = rd64(r + 40);
  p->align = rd64(r + 48);
}

static int take_load(elf_load_t* s, uint32_t i, const elf_phdr_t* p) {
  if ((p->flags & PF_W_) && (p->flags & PF_X_)) {
    return fail(s, VMRT_ELF_INVALID, "segment %u asks to be writable and executable", i);
  }
  if (p->filesz > p->memsz) {
    return fail(s, VMRT_ELF_INVALID, "segment %u has filesz %llu > memsz %llu", i,
                ull(p->filesz), ull(p->memsz));
  }
  if (p->offset > s->size || p->filesz > s->size - p->offset) {
    return fail(s, VMRT_ELF_INVALID, "segment %u file bytes [%llu, +%llu) lie outside the "
                "%zu-byte image", i, ull(p->offset), ull(p->filesz), s->size);
  }
  if (p->memsz > MAX_SPAN || p->vaddr > UINT64_MAX - p->memsz - MAX_ALIGN) {
    return fail(s, VMRT_ELF_INVALID, "segment %u [%#llx, +%llu) is out of range", i,
                ull(p->vaddr), ull(p->memsz));
  }
  if ((p->align & (p->align - 1)) != 0 || p->align > MAX_ALIGN) {
    return fail(s, VMRT_ELF_INVALID, "segment %u alignment %llu unsupported", i, ull(p->align));
  }
  if (p->memsz == 0) return 0; /* occupies nothing */
  vmrt_elf_module_t* m = s->m;
  if (m->seg_count == MAX_LOADS) {
    return fail(s, VMRT_ELF_INVALID, "more than %u loadable segments", MAX_LOADS);
  }
  elf_seg_t* g = &m->segs[m->seg_count++];
  g->vaddr = p->vaddr;
  g->memsz = p->memsz;
  g->offset = p->offset;
  g->filesz = p->filesz;
  g->flags = p->flags;
  if (p->align > s->max_align) s->max_align = p->align;
  return 0;
}

static int scan_phdrs(elf_load_t* s) {
  for (uint32_t i = 0; i < s->phnum; ++i) {
    elf_phdr_t p;
    read_phdr(s, i, &p);
    int rc = 0;
    if (p.type == PT_LOAD_) {
      rc = take_load(s, i, &p);
    } else if (p.type == PT_DYNAMIC_) {
      if (s->have_dynamic) return fail(s, VMRT_ELF_INVALID, "more than one PT_DYNAMIC");
      s->have_dynamic = 1;
      s->dyn_vaddr = p.vaddr;
      s->dyn_size = p.filesz;
    } else if (p.type == PT_GNU_RELRO_) {
      if (s->have_relro) return fail(s, VMRT_ELF_INVALID, "more than one PT_GNU_RELRO");
      s->have_relro = 1;
      s->relro_vaddr = p.vaddr;
      s->relro_size = p.memsz;
    } else if (p.type == PT_TLS_) {
      rc = fail(s, VMRT_ELF_INVALID, "thread-local storage (PT_TLS) is unsupported");
    }
    if (rc) return rc;
  }
  if (s->m->seg_count == 0) return fail(s, VMRT_ELF_INVALID, "no loadable segment");
  return 0;
}

/* Segments may share a page (they are copied, not mapped from the file), but
 * never bytes, and a shared page must want the same protection. */
static int check_overlaps(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  for (size_t i = 0; i < m->seg_count; ++i) {
    for (size_t j = i + 1; j < m->seg_count; ++j) {
      const elf_seg_t* a = &m->segs[i];
      const elf_seg_t* b = &m->segs[j];
      if (a->vaddr < b->vaddr + b->memsz && b->vaddr < a->vaddr + a->memsz) {
        return fail(s, VMRT_ELF_INVALID, "loadable segments overlap at %#llx",
                    ull(a->vaddr > b->vaddr ? a->vaddr : b->vaddr));
      }
      uint64_t a_lo = page_down(a->vaddr, s->page), a_hi = page_up(a->vaddr + a->memsz, s->page);
      uint64_t b_lo = page_down(b->vaddr, s->page), b_hi = page_up(b->vaddr + b->memsz, s->page);
      if (a_lo < b_hi && b_lo < a_hi && seg_prot(a->flags) != seg_prot(b->flags)) {
        return fail(s, VMRT_ELF_INVALID, "segments with different permissions share a page");
      }
    }
  }
  return 0;
}

static int plan_layout(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  s->vmin = UINT64_MAX;
  s->vmax = 0;
  for (size_t i = 0; i < m->seg_count; ++i) {
    uint64_t lo = page_down(m->segs[i].vaddr, s->page);
    uint64_t hi = page_up(m->segs[i].vaddr + m->segs[i].memsz, s->page);
    if (lo < s->vmin) s->vmin = lo;
    if (hi > s->vmax) s->vmax = hi;
  }
  if (s->vmax - s->vmin > MAX_SPAN) {
    return fail(s, VMRT_ELF_INVALID, "segments span %llu bytes, more than 1 GiB",
                ull(s->vmax - s->vmin));
  }
  return check_overlaps(s);
}

/*---------------------------------------------------------------------------
 * Mapping
 *---------------------------------------------------------------------------*/

/* One PROT_NONE reservation for the whole span, so that gaps between segments
 * stay inaccessible and unloading is a single munmap. When a segment wants
 * more than page alignment, over-reserve and trim so that the bias keeps every
 * address congruent to its link-time value modulo that alignment. */
static int reserve_span(elf_load_t* s) {
  vmrt_elf_module_t* m = s->m;
  size_t span = (size_t)(s->vmax - s->vmin);
  size_t extra = s->max_align > s->page ? (size_t)s->max_align : 0;
  void* raw = mmap(NULL, span + extra, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    return fail(s, VMRT_ELF_EXHAUSTED, "reserving %zu bytes failed (errno %d)", span + extra,
                errno);
  }
  uintptr_t start = (uintptr_t)raw;
  uintptr_t align_mask = (uintptr_t)(extra ? s->max_align : s->page) - 1;
  uintptr_t base = start + (((uintptr_t)s->vmin - start) & align_mask);
  if (base > start) munmap(raw, base - start);
  if (start + span + extra > base + span) {
    munmap((void*)(base + span), start + span + extra - (base + span));
  }
  m->base = base;
  m->size = span;
  m->bias = base - (uintptr_t)s->vmin;
  return 0;
}

static int protect_range(elf_load_t* s, uint64_t lo, uint64_t hi, int prot) {
  /* lo/hi are page-aligned link-time addresses inside the span. */
  if (hi <= lo) return 0;
  if (mprotect((void*)(uintptr_t)(s->m->bias + lo), (size_t)(hi - lo), prot) != 0) {
    return fail(s, VMRT_ELF_EXHAUSTED, "mprotect of %llu bytes failed (errno %d)",
                ull(hi - lo), errno);
  }
  return 0;
}

static int copy_segments(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    uint64_t lo = page_down(g->vaddr, s->page), hi = page_up(g->vaddr + g->memsz, s->page);
    int rc = protect_range(s, lo, hi, PROT_READ | PROT_WRITE);
    if (rc) return rc;
    uint8_t* dst = (uint8_t*)(uintptr_t)(m->bias + g->vaddr);
    if (g->filesz) memcpy(dst, s->data + g->offset, (size_t)g->filesz);
    /* Zero the .bss part of the page where the file bytes end; later pages are
     * untouched fresh anonymous memory, which the kernel hands out zeroed, and
     * writing them would only commit memory for nothing. */
    uint64_t file_end = g->vaddr + g->filesz;
    uint64_t zero_end = page_up(file_end, s->page);
    if (zero_end > g->vaddr + g->memsz) zero_end = g->vaddr + g->memsz;
    if (zero_end > file_end) memset(dst + g->filesz, 0, (size_t)(zero_end - file_end));
  }
  return 0;
}

/*---------------------------------------------------------------------------
 * Dynamic section and symbols
 *---------------------------------------------------------------------------*/

static int check_dyn_tags(elf_load_t* s) {
  if (dyn_has(s, DT_REL_) || dyn_has(s, DT_RELSZ_)) {
    return fail(s, VMRT_ELF_INVALID, "DT_REL relocations are unsupported (x86-64 uses RELA)");
  }
  if (dyn_has(s, DT_RELR_) || dyn_has(s, DT_RELRSZ_)) {
    return fail(s, VMRT_ELF_INVALID, "packed DT_RELR relocations are unsupported");
  }
  if (dyn_has(s, DT_RELAENT_) && s->dyn[DT_RELAENT_] != RELA_SIZE) {
    return fail(s, VMRT_ELF_INVALID, "DT_RELAENT %llu, not 24", ull(s->dyn[DT_RELAENT_]));
  }
  if (dyn_has(s, DT_SYMENT_) && s->dyn[DT_SYMENT_] != SYM_SIZE) {
    return fail(s, VMRT_ELF_INVALID, "DT_SYMENT %llu, not 24", ull(s->dyn[DT_SYMENT_]));
  }
  if (dyn_has(s, DT_PLTREL_) && s->dyn[DT_PLTREL_] != DT_RELA_) {
    return fail(s, VMRT_ELF_INVALID, "DT_PLTREL %llu, only DT_RELA is supported",
                ull(s->dyn[DT_PLTREL_]));
  }
  return 0;
}

static int parse_dynamic(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t count = s->dyn_size / DYN_SIZE;
  if (!s->have_dynamic || count == 0) return fail(s, VMRT_ELF_INVALID, "no PT_DYNAMIC");
  if (seg_find(m, s->dyn_vaddr, count * DYN_SIZE, NEED_READ) < 0) {
    return fail(s, VMRT_ELF_INVALID, "PT_DYNAMIC [%#llx, +%llu) lies outside the loaded "
                "segments", ull(s->dyn_vaddr), ull(count * DYN_SIZE));
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t raw[DYN_SIZE];
    img_read(m, s->dyn_vaddr + i * DYN_SIZE, raw, sizeof raw);
    uint64_t tag = rd64(raw), value = rd64(raw + 8);
    if (tag == DT_NULL_) break;
    if (tag < DT_TRACKED) {
      s->dyn[tag] = value;
      s->dyn_seen |= (uint64_t)1 << tag;
    } else if (tag == DT_GNU_HASH_) {
      s->have_gnu_hash = 1;
      s->gnu_hash = value;
    }
  }
  return check_dyn_tags(s);
}

/* DT_GNU_HASH has no symbol count: it is one past the last symbol of the
 * chain that starts at the highest bucket value. */
static int gnu_hash_count(elf_load_t* s, uint64_t* out) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t at = s->gnu_hash, buckets, chains;
  uint8_t hdr[16];
  if (seg_find(m, at, sizeof hdr, NEED_READ) < 0) goto bad;
  img_read(m, at, hdr, sizeof hdr);
  uint64_t nbuckets = rd32(hdr), symoffset = rd32(hdr + 4), bloom = rd32(hdr + 8);
  if (__builtin_add_overflow(at, 16 + bloom * 8, &buckets) ||
      __builtin_add_overflow(buckets, nbuckets * 4, &chains) ||
      seg_find(m, buckets, nbuckets * 4, NEED_READ) < 0) goto bad;
  uint64_t last = 0;
  for (uint64_t b = 0; b < nbuckets; ++b) {
    uint8_t raw[4];
    img_read(m, buckets + b * 4, raw, 4);
    if (rd32(raw) > last) last = rd32(raw);
  }
  if (last < symoffset) {
    *out = symoffset;
    return 0;
  }
  for (uint64_t index = last; index < MAX_SYMBOLS; ++index) {
    uint64_t entry = chains + (index - symoffset) * 4;
    uint8_t raw[4];
    if (entry < chains || seg_find(m, entry, 4, NEED_READ) < 0) goto bad;
    img_read(m, entry, raw, 4);
    if (rd32(raw) & 1u) {
      *out = index + 1;
      return 0;
    }
  }
bad:
  return fail(s, VMRT_ELF_INVALID, "DT_GNU_HASH table is malformed or out of range");
}

static int symbol_count(elf_load_t* s, uint64_t* out) {
  const vmrt_elf_module_t* m = s->m;
  if (dyn_has(s, DT_HASH_)) {
    /* DT_HASH is nbucket, nchain, ...; nchain equals the number of symbols. */
    uint8_t raw[8];
    if (seg_find(m, s->dyn[DT_HASH_], sizeof raw, NEED_READ) < 0) {
      return fail(s, VMRT_ELF_INVALID, "DT_HASH lies outside the loaded segments");
    }
    img_read(m, s->dyn[DT_HASH_], raw, sizeof raw);
    *out = rd32(raw + 4);
    return 0;
  }
  if (s->have_gnu_hash) return gnu_hash_count(s, out);
  return fail(s, VMRT_ELF_INVALID, "no DT_HASH or DT_GNU_HASH to size the symbol table");
}

static int parse_symbols(elf_load_t* s) {
  vmrt_elf_module_t* m = s->m;
  if (!dyn_has(s, DT_SYMTAB_) || !dyn_has(s, DT_STRTAB_) || !dyn_has(s, DT_STRSZ_) ||
      s->dyn[DT_STRSZ_] == 0) {
    return fail(s, VMRT_ELF_INVALID, "no dynamic symbol table (DT_SYMTAB/DT_STRTAB/DT_STRSZ)");
  }
  uint64_t count = 0;
  int rc = symbol_count(s, &count);
  if (rc) return rc;
  if (count == 0 || count > MAX_SYMBOLS) {
    return fail(s, VMRT_ELF_INVALID, "symbol count %llu unsupported", ull(count));
  }
  if (seg_find(m, s->dyn[DT_SYMTAB_], count * SYM_SIZE, NEED_READ) < 0) {
    return fail(s, VMRT_ELF_INVALID, "symbol table (%llu entries at %#llx) lies outside the "
                "loaded segments", ull(count), ull(s->dyn[DT_SYMTAB_]));
  }
  if (seg_find(m, s->dyn[DT_STRTAB_], s->dyn[DT_STRSZ_], NEED_READ) < 0) {
    return fail(s, VMRT_ELF_INVALID, "string table lies outside the loaded segments");
  }
  m->symtab = s->dyn[DT_SYMTAB_];
  m->sym_count = count;
  m->strtab = s->dyn[DT_STRTAB_];
  m->strsz = s->dyn[DT_STRSZ_];
  return 0;
}

/* The embedded format links everything in: any undefined symbol is an import
 * nothing could satisfy. Entry 0 is the reserved null symbol. */
static int check_no_imports(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  for (uint64_t i = 1; i < m->sym_count; ++i) {
    elf_sym_t sym;
    read_sym(m, i, &sym);
    if (sym.shndx != SHN_UNDEF_) continue;
    char name[80];
    sym_name(m, sym.name, name, sizeof name);
    return fail(s, VMRT_ELF_NOT_FOUND, "undefined symbol '%s' (embedded executables cannot "
                "import symbols)", name);
  }
  return 0;
}

/*---------------------------------------------------------------------------
 * Relocations
 *---------------------------------------------------------------------------*/

/* The value and width (bytes) relocation `type` stores, from the symbol value
 * S, addend A and place P (all modulo 2^64, as the psABI computes them). */
static int reloc_value(elf_load_t* s, uint32_t type, uint64_t sym_index, uint64_t S,
                       uint64_t A, uint64_t P, uint64_t* value, unsigned* width) {
  *width = 8;
  switch (type) {
    case R_64: *value = S + A; return 0;
    case R_RELATIVE: *value = (uint64_t)s->m->bias + A; return 0;
    /* COPY is meaningless inside one self-contained object; IREE's loader
     * stores the symbol address for it like GLOB_DAT, and so do we. */
    case R_GLOB_DAT: case R_JUMP_SLOT: case R_COPY:
      if (sym_index == 0) break;
      *value = S;
      return 0;
    case R_32: *value = S + A; *width = 4; return *value > UINT32_MAX ? -1 : 0;
    case R_32S: *value = S + A; *width = 4;
      return *value + 0x80000000u > UINT32_MAX ? -1 : 0;
    case R_PC32: *value = S + A - P; *width = 4;
      return *value + 0x80000000u > UINT32_MAX ? -1 : 0;
    default:
      return fail(s, VMRT_ELF_INVALID, "unsupported x86-64 relocation type %u", type);
  }
  return fail(s, VMRT_ELF_INVALID, "relocation type %u without a symbol", type);
}

static int apply_rela(elf_load_t* s, const uint8_t raw[RELA_SIZE]) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t offset = rd64(raw), info = rd64(raw + 8), addend = rd64(raw + 16);
  uint32_t type = (uint32_t)info;
  uint64_t sym_index = info >> 32, S = 0, value = 0;
  unsigned width = 8;
  if (type == R_NONE) return 0;
  if (sym_index) {
    if (sym_index >= m->sym_count) {
      return fail(s, VMRT_ELF_INVALID, "relocation at %#llx names symbol %llu of %llu",
                  ull(offset), ull(sym_index), ull(m->sym_count));
    }
    elf_sym_t sym;
    read_sym(m, sym_index, &sym);
    S = sym.shndx == SHN_ABS_ ? sym.value : (uint64_t)m->bias + sym.value;
  }
  int rc = reloc_value(s, type, sym_index, S, addend, (uint64_t)m->bias + offset, &value, &width);
  if (rc > 0) return rc;
  if (rc < 0) {
    return fail(s, VMRT_ELF_INVALID, "relocation type %u at %#llx overflows 32 bits", type,
                ull(offset));
  }
  /* During relocation every segment is read-write, so any one may be patched. */
  if (seg_find(m, offset, width, NEED_ANY) < 0) {
    return fail(s, VMRT_ELF_INVALID, "relocation target %#llx (+%u) lies outside the loaded "
                "segments", ull(offset), width);
  }
  void* target = (void*)(uintptr_t)(m->bias + offset);
  if (width == 8) {
    memcpy(target, &value, 8);
  } else {
    uint32_t narrow = (uint32_t)value;
    memcpy(target, &narrow, 4);
  }
  return 0;
}

static int apply_table(elf_load_t* s, unsigned addr_tag, unsigned size_tag, const char* what) {
  uint64_t size = dyn_has(s, size_tag) ? s->dyn[size_tag] : 0;
  if (size == 0) return 0;
  uint64_t table = s->dyn[addr_tag];
  if (!dyn_has(s, addr_tag) || size % RELA_SIZE != 0 ||
      seg_find(s->m, table, size, NEED_READ) < 0) {
    return fail(s, VMRT_ELF_INVALID, "%s table (%#llx, %llu bytes) is malformed or outside "
                "the loaded segments", what, ull(table), ull(size));
  }
  for (uint64_t at = 0; at < size; at += RELA_SIZE) {
    /* Copied out first: a relocation may legally (if oddly) patch its table. */
    uint8_t raw[RELA_SIZE];
    img_read(s->m, table + at, raw, sizeof raw);
    int rc = apply_rela(s, raw);
    if (rc) return rc;
  }
  return 0;
}

/*---------------------------------------------------------------------------
 * Protection and initializers
 *---------------------------------------------------------------------------*/

static int protect_segments(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    int rc = protect_range(s, page_down(g->vaddr, s->page),
                           page_up(g->vaddr + g->memsz, s->page), seg_prot(g->flags));
    if (rc) return rc;
  }
  if (!s->have_relro || s->relro_size == 0) return 0;
  uint64_t span = s->vmax - s->vmin;
  if (s->relro_vaddr < s->vmin || s->relro_size > span ||
      s->relro_vaddr - s->vmin > span - s->relro_size) {
    return fail(s, VMRT_ELF_INVALID, "PT_GNU_RELRO lies outside the image");
  }
  /* Like glibc, round both ends down: the page holding the end of RELRO may
   * also hold writable data. Only writable segments need (or get) the change,
   * so RELRO can never take execute permission away from code. */
  uint64_t r_lo = page_down(s->relro_vaddr, s->page);
  uint64_t r_hi = page_down(s->relro_vaddr + s->relro_size, s->page);
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    if (!(g->flags & PF_W_)) continue;
    uint64_t lo = page_down(g->vaddr, s->page), hi = page_up(g->vaddr + g->memsz, s->page);
    int rc = protect_range(s, lo > r_lo ? lo : r_lo, hi < r_hi ? hi : r_hi, PROT_READ);
    if (rc) return rc;
  }
  return 0;
}

static int init_target_ok(const vmrt_elf_module_t* m, uint64_t address) {
  return seg_find(m, address - (uint64_t)m->bias, 1, NEED_EXEC) >= 0;
}

/* Checks DT_INIT and every DT_INIT_ARRAY entry (absolute addresses once
 * relocated; 0 and -1 mean "none") point into executable segments. */
static int check_initializers(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  if (dyn_has(s, DT_INIT_) && s->dyn[DT_INIT_] != 0 &&
      seg_find(m, s->dyn[DT_INIT_], 1, NEED_EXEC) < 0) {
    return fail(s, VMRT_ELF_INVALID, "DT_INIT %#llx is not in an executable segment",
                ull(s->dyn[DT_INIT_]));
  }
  uint64_t size = dyn_has(s, DT_INIT_ARRAYSZ_) ? s->dyn[DT_INIT_ARRAYSZ_] : 0;
  if (size == 0) return 0;
  uint64_t array = s->dyn[DT_INIT_ARRAY_];
  if (!dyn_has(s, DT_INIT_ARRAY_) || size % 8 != 0 || seg_find(m, array, size, NEED_READ) < 0) {
    return fail(s, VMRT_ELF_INVALID, "DT_INIT_ARRAY is malformed or outside the image");
  }
  for (uint64_t at = 0; at < size; at += 8) {
    uint8_t raw[8];
    img_read(m, array + at, raw, sizeof raw);
    uint64_t entry = rd64(raw);
    if (entry == 0 || entry == UINT64_MAX) continue;
    if (!init_target_ok(m, entry)) {
      return fail(s, VMRT_ELF_INVALID, "DT_INIT_ARRAY entry %llu is not in an executable "
                  "segment", ull(at / 8));
    }
  }
  return 0;
}

/* IREE's loader runs DT_INIT then DT_INIT_ARRAY (no arguments) before the
 * library is queried; finalizers it never runs, and neither do we. */
static void run_initializers(const elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  typedef void (*init_fn_t)(void);
  if (dyn_has(s, DT_INIT_) && s->dyn[DT_INIT_] != 0) {
    ((init_fn_t)(m->bias + (uintptr_t)s->dyn[DT_INIT_]))();
  }
  uint64_t size = dyn_has(s, DT_INIT_ARRAYSZ_) ? s->dyn[DT_INIT_ARRAYSZ_] : 0;
  for (uint64_t at = 0; at < size; at += 8) {
    uint8_t raw[8];
    img_read(m, s->dyn[DT_INIT_ARRAY_] + at, raw, sizeof raw);
    uint64_t entry = rd64(raw);
    /* Re-checked: an earlier initializer could have rewritten the array. */
    if (entry == 0 || entry == UINT64_MAX || !init_target_ok(m, entry)) continue;
    ((init_fn_t)(uintptr_t)entry)();
  }
}

/*---------------------------------------------------------------------------
 * API
 *---------------------------------------------------------------------------*/

static int load_steps(elf_load_t* s) {
  int rc = scan_phdrs(s);
  if (!rc) rc = plan_layout(s);
  if (!rc) rc = reserve_span(s);
  if (!rc) rc = copy_segments(s);
  if (!rc) rc = parse_dynamic(s);
  if (!rc) rc = parse_symbols(s);
  if (!rc) rc = check_no_imports(s);
  if (!rc) rc = apply_table(s, DT_RELA_, DT_RELASZ_, "DT_RELA");
  if (!rc) rc = apply_table(s, DT_JMPREL_, DT_PLTRELSZ_, "DT_JMPREL");
  if (!rc) rc = check_initializers(s);
  if (!rc) rc = protect_segments(s);
  return rc;
}

int vmrt_elf_load_ex(const uint8_t* data, size_t size, uint32_t flags,
                     vmrt_elf_module_t** out_module, char* error, size_t error_capacity) {
  elf_load_t s;
  memset(&s, 0, sizeof s);
  s.data = data;
  s.size = data ? size : 0;
  s.error = error;
  s.error_capacity = error_capacity;
  if (error && error_capacity) error[0] = '\0';
  if (!out_module) return fail(&s, VMRT_ELF_INVALID, "no output pointer");
  *out_module = NULL;
  int rc = check_ehdr(&s);
  if (rc) return rc;
  long page = sysconf(_SC_PAGESIZE);
  s.page = page > 0 ? (uint64_t)page : 4096;
  s.max_align = s.page;
  s.m = (vmrt_elf_module_t*)calloc(1, sizeof *s.m);
  if (!s.m) return fail(&s, VMRT_ELF_EXHAUSTED, "out of memory");
  rc = load_steps(&s);
  if (rc) {
    vmrt_elf_unload(s.m);
    return rc;
  }
  if (!(flags & VMRT_ELF_LOAD_NO_INITIALIZERS)) run_initializers(&s);
  *out_module = s.m;
  return 0;
}

/* Exported means: defined in the image (not absolute or common), global or
 * weak, default or protected visibility, a function (or untyped label), and
 * its address inside an executable segment. */
static int exported_function(const vmrt_elf_module_t* m, const elf_sym_t* sym) {
  unsigned bind = sym->info >> 4, type = sym->info & 0xfu, vis = sym->other & 3u;
  if (sym->shndx == SHN_UNDEF_ || sym->shndx == SHN_ABS_ || sym->shndx == SHN_COMMON_) return 0;
  if (bind != STB_GLOBAL_ && bind != STB_WEAK_) return 0;
  if (type != STT_FUNC_ && type != STT_NOTYPE_) return 0;
  if (vis != STV_DEFAULT_ && vis != STV_PROTECTED_) return 0;
  return seg_find(m, sym->value, 1, NEED_EXEC) >= 0;
}

void* vmrt_elf_lookup(vmrt_elf_module_t* m, const char* name) {
  if (!m || !name) return NULL;
  size_t length = strlen(name);
  void* weak = NULL;
  for (uint64_t i = 1; i < m->sym_count; ++i) {
    elf_sym_t sym;
    read_sym(m, i, &sym);
    /* Compare within .dynstr only (the name plus its NUL must fit). */
    if (sym.name >= m->strsz || length >= m->strsz - sym.name) continue;
    const char* candidate = (const char*)(uintptr_t)(m->bias + m->strtab + sym.name);
    if (memcmp(candidate, name, length + 1) != 0 || !exported_function(m, &sym)) continue;
    void* address = (void*)(uintptr_t)(m->bias + sym.value);
    if ((sym.info >> 4) == STB_GLOBAL_) return address;
    if (!weak) weak = address;
  }
  return weak;
}

void vmrt_elf_unload(vmrt_elf_module_t* m) {
  if (!m) return;
  if (m->size) munmap((void*)m->base, m->size);
  free(m);
}

uintptr_t vmrt_elf_base(vmrt_elf_module_t* m) { return m ? m->base : 0; }
size_t vmrt_elf_size(vmrt_elf_module_t* m) { return m ? m->size : 0; }

#else /* not x86-64 Linux: the machine code could not run here anyway */

struct vmrt_elf_module {
  int unused;
};

int vmrt_elf_load_ex(const uint8_t* data, size_t size, uint32_t flags,
                     vmrt_elf_module_t** out_module, char* error, size_t error_capacity) {
  (void)data; (void)size; (void)flags;
  if (out_module) *out_module = NULL;
  if (error && error_capacity) {
    snprintf(error, error_capacity, "embedded ELF executables need an x86-64 Linux host");
  }
  return VMRT_ELF_UNAVAILABLE;
}

void* vmrt_elf_lookup(vmrt_elf_module_t* m, const char* name) { (void)m; (void)name; return NULL; }
void vmrt_elf_unload(vmrt_elf_module_t* m) { (void)m; }
uintptr_t vmrt_elf_base(vmrt_elf_module_t* m) { (void)m; return 0; }
size_t vmrt_elf_size(vmrt_elf_module_t* m) { (void)m; return 0; }

#endif

int vmrt_elf_load(const uint8_t* data, size_t size, vmrt_elf_module_t** out_module,
                  char* error, size_t error_capacity) {
  return vmrt_elf_load_ex(data, size, 0, out_module, error, error_capacity);
}
