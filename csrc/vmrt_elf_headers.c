/* The header and program-header checks of vmrt's ELF loader (vmrt_elf.c), which
 * images for the system loader pass too (vmrt_executable.c). They read the file
 * bytes, before anything is mapped; vmrt/hal/elf_check.py is their Python twin. */
#define _DEFAULT_SOURCE 1

#include "vmrt_elf_internal.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__linux__)

#include <unistd.h>

enum { SHT_NOBITS_ = 8, SHF_ALLOC_ = 2, SHF_TLS_ = 0x400 };

/*---------------------------------------------------------------------------
 * Headers
 *---------------------------------------------------------------------------*/

static int check_ident(elf_load_t* s) {
  const uint8_t* d = s->data;
  if (s->size < EHDR_SIZE) {
    return elf_fail(s, VMRT_ELF_INVALID, "%zu bytes is shorter than an ELF64 header (64)", s->size);
  }
  if (memcmp(d, "\x7f" "ELF", 4) != 0) return elf_fail(s, VMRT_ELF_INVALID, "no \\x7fELF magic");
  if (d[4] == 1) {
    return elf_fail(s, VMRT_ELF_INCOMPATIBLE, "32-bit ELF (ELFCLASS32); x86-64 needs ELFCLASS64");
  }
  if (d[4] != 2) return elf_fail(s, VMRT_ELF_INVALID, "unknown ELF class %u", d[4]);
  if (d[5] == 2) {
    return elf_fail(s, VMRT_ELF_INCOMPATIBLE, "big-endian ELF; x86-64 is little-endian");
  }
  if (d[5] != 1) return elf_fail(s, VMRT_ELF_INVALID, "unknown ELF data encoding %u", d[5]);
  if (d[6] != 1) return elf_fail(s, VMRT_ELF_INVALID, "ELF identification version %u, not 1", d[6]);
  return 0;
}

static int check_ehdr(elf_load_t* s) {
  int rc = check_ident(s);
  if (rc) return rc;
  const uint8_t* d = s->data;
  uint16_t type = rd16(d + 16), machine = rd16(d + 18);
  if (rd32(d + 20) != 1) {
    return elf_fail(s, VMRT_ELF_INVALID, "ELF version %u, not 1", rd32(d + 20));
  }
  if (machine != 62) {
    return elf_fail(s, VMRT_ELF_INCOMPATIBLE, "ELF machine %u is not x86-64 (62)", machine);
  }
  if (type != 3) {
    return elf_fail(s, VMRT_ELF_INVALID, "ELF type %u is not a shared object (ET_DYN)", type);
  }
  if (rd16(d + 52) != EHDR_SIZE || rd16(d + 54) != PHDR_SIZE) {
    return elf_fail(s, VMRT_ELF_INVALID, "header size %u / program header size %u, not 64 / 56",
                    rd16(d + 52), rd16(d + 54));
  }
  s->phoff = rd64(d + 32);
  s->phnum = rd16(d + 56);
  /* 0xffff (PN_XNUM) would move the count into section 0: never emitted here. */
  if (s->phnum == 0 || s->phnum == 0xffff) {
    return elf_fail(s, VMRT_ELF_INVALID, "program header count %u unsupported", s->phnum);
  }
  if (s->phoff > s->size || (uint64_t)s->phnum * PHDR_SIZE > s->size - s->phoff) {
    return elf_fail(s, VMRT_ELF_INVALID, "program headers (offset %llu, %u entries) lie outside "
                    "the %zu-byte image", ull(s->phoff), s->phnum, s->size);
  }
  return 0;
}

void elf_read_phdr(const elf_load_t* s, uint32_t index, elf_phdr_t* p) {
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
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u asks to be writable and executable", i);
  }
  if (p->filesz > p->memsz) {
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u has filesz %llu > memsz %llu", i,
                    ull(p->filesz), ull(p->memsz));
  }
  if (p->offset > s->size || p->filesz > s->size - p->offset) {
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u file bytes [%llu, +%llu) lie outside the "
                "%zu-byte image", i, ull(p->offset), ull(p->filesz), s->size);
  }
  if (p->memsz > MAX_SPAN || p->vaddr > UINT64_MAX - p->memsz - MAX_ALIGN) {
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u [%#llx, +%llu) is out of range", i,
                ull(p->vaddr), ull(p->memsz));
  }
  if ((p->align & (p->align - 1)) != 0 || p->align > MAX_ALIGN) {
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u alignment %llu unsupported", i, ull(p->align));
  }
  /* The ELF spec asks loadable segments for addresses congruent to their file
   * offsets modulo their alignment (linkers lay files out so); the system
   * loader, which maps file pages, needs it modulo the page size. */
  uint64_t modulus = (s->flags & VMRT_ELF_LOAD_FOR_SYSTEM) && p->align < s->page ? s->page
                                                                                 : p->align;
  if (modulus > 1 && (p->vaddr - p->offset) % modulus != 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "segment %u offset %#llx and address %#llx differ "
                    "modulo %llu", i, ull(p->offset), ull(p->vaddr), ull(modulus));
  }
  if ((p->flags & PF_X_) && p->filesz != p->memsz) {
    return elf_fail(s, VMRT_ELF_INVALID, "executable segment %u has %llu file bytes of %llu "
                    "(its code would end in zeros)", i, ull(p->filesz), ull(p->memsz));
  }
  if (p->memsz == 0) return 0; /* occupies nothing */
  vmrt_elf_module_t* m = s->m;
  if (m->seg_count == MAX_LOADS) {
    return elf_fail(s, VMRT_ELF_INVALID, "more than %u loadable segments", MAX_LOADS);
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
    elf_read_phdr(s, i, &p);
    int rc = 0;
    if (p.type == PT_LOAD_) {
      rc = take_load(s, i, &p);
    } else if (p.type == PT_DYNAMIC_) {
      if (s->have_dynamic) return elf_fail(s, VMRT_ELF_INVALID, "more than one PT_DYNAMIC");
      s->have_dynamic = 1;
      s->dyn_vaddr = p.vaddr;
      s->dyn_size = p.filesz;
    } else if (p.type == PT_GNU_RELRO_) {
      if (s->have_relro) return elf_fail(s, VMRT_ELF_INVALID, "more than one PT_GNU_RELRO");
      s->have_relro = 1;
      s->relro_vaddr = p.vaddr;
      s->relro_size = p.memsz;
    } else if (p.type == PT_TLS_) {
      rc = elf_fail(s, VMRT_ELF_INVALID, "thread-local storage (PT_TLS) is unsupported");
    } else if (p.type == PT_GNU_STACK_ && (p.flags & PF_X_) &&
               (s->flags & VMRT_ELF_LOAD_FOR_SYSTEM)) {
      /* The system loader would make every thread's stack executable. */
      rc = elf_fail(s, VMRT_ELF_INVALID, "PT_GNU_STACK asks for an executable stack");
    }
    if (rc) return rc;
  }
  if (s->m->seg_count == 0) return elf_fail(s, VMRT_ELF_INVALID, "no loadable segment");
  return 0;
}

/* Segments may share a page (they are copied, not mapped from the file), but
 * never bytes (in memory or in the file), and a shared page must want the same
 * protection. */
static int check_overlaps(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  for (size_t i = 0; i < m->seg_count; ++i) {
    for (size_t j = i + 1; j < m->seg_count; ++j) {
      const elf_seg_t* a = &m->segs[i];
      const elf_seg_t* b = &m->segs[j];
      if (a->vaddr < b->vaddr + b->memsz && b->vaddr < a->vaddr + a->memsz) {
        return elf_fail(s, VMRT_ELF_INVALID, "loadable segments overlap at %#llx",
                        ull(a->vaddr > b->vaddr ? a->vaddr : b->vaddr));
      }
      if (a->offset < b->offset + b->filesz && b->offset < a->offset + a->filesz) {
        return elf_fail(s, VMRT_ELF_INVALID, "loadable segments share file bytes at %llu",
                        ull(a->offset > b->offset ? a->offset : b->offset));
      }
      uint64_t a_lo = page_down(a->vaddr, s->page), a_hi = page_up(a->vaddr + a->memsz, s->page);
      uint64_t b_lo = page_down(b->vaddr, s->page), b_hi = page_up(b->vaddr + b->memsz, s->page);
      if (a_lo < b_hi && b_lo < a_hi && seg_prot(a->flags) != seg_prot(b->flags)) {
        return elf_fail(s, VMRT_ELF_INVALID, "segments with different permissions share a page");
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
    return elf_fail(s, VMRT_ELF_INVALID, "segments span %llu bytes, more than 1 GiB",
                    ull(s->vmax - s->vmin));
  }
  return check_overlaps(s);
}

int elf_section_table(const elf_load_t* s, uint64_t* shoff, uint32_t* shnum) {
  *shoff = rd64(s->data + 40);
  *shnum = rd16(s->data + 60);
  return rd16(s->data + 58) == SHDR_SIZE && *shoff <= s->size &&
         (uint64_t)*shnum * SHDR_SIZE <= s->size - *shoff;
}

/* Sections say where their bytes are both in the file and in memory: every
 * allocated section must be inside a loadable segment (code or data of a
 * dropped segment would be missing), and the segment's file offset must place
 * the section's bytes at the section's own offset (a moved segment would load
 * other bytes). Thread-local sections describe a template, not memory. */
static int check_sections_agree(elf_load_t* s) {
  uint64_t shoff;
  uint32_t shnum;
  if (!elf_section_table(s, &shoff, &shnum)) return 0;
  const vmrt_elf_module_t* m = s->m;
  for (uint32_t i = 0; i < shnum; ++i) {
    const uint8_t* h = s->data + shoff + (uint64_t)i * SHDR_SIZE;
    uint64_t flags = rd64(h + 8), addr = rd64(h + 16), offset = rd64(h + 24), size = rd64(h + 32);
    if (!(flags & SHF_ALLOC_) || (flags & SHF_TLS_) || size == 0) continue;
    int k = seg_find(m, addr, size, NEED_ANY);
    if (k < 0) {
      return elf_fail(s, VMRT_ELF_INVALID, "section %u [%#llx, +%llu) is in no loadable segment",
                      i, ull(addr), ull(size));
    }
    if (rd32(h + 4) == SHT_NOBITS_ || addr - m->segs[k].vaddr + size > m->segs[k].filesz) {
      continue;
    }
    if (offset != m->segs[k].offset + (addr - m->segs[k].vaddr)) {
      return elf_fail(s, VMRT_ELF_INVALID, "section %u (at %#llx) is at file offset %llu but its "
                      "segment loads it from %llu", i, ull(addr), ull(offset),
                      ull(m->segs[k].offset + (addr - m->segs[k].vaddr)));
    }
  }
  return 0;
}

int elf_check_headers(elf_load_t* s) {
  long page = sysconf(_SC_PAGESIZE);
  s->page = page > 0 ? (uint64_t)page : 4096;
  s->max_align = s->page;
  int rc = check_ehdr(s);
  if (!rc) rc = scan_phdrs(s);
  if (!rc) rc = plan_layout(s);
  if (!rc) rc = check_sections_agree(s);
  return rc;
}

void elf_state_init(elf_load_t* s, const uint8_t* data, size_t size, uint32_t flags,
                    char* error, size_t error_capacity) {
  memset(s, 0, sizeof *s);
  s->data = data;
  s->size = data ? size : 0;
  s->flags = flags;
  s->error = error;
  s->error_capacity = error_capacity;
  if (error && error_capacity) error[0] = '\0';
}

int vmrt_elf_check_headers(const uint8_t* data, size_t size, uint32_t flags, char* error,
                           size_t error_capacity) {
  elf_load_t s;
  elf_state_init(&s, data, size, flags, error, error_capacity);
  s.m = (vmrt_elf_module_t*)calloc(1, sizeof *s.m);
  if (!s.m) return elf_fail(&s, VMRT_ELF_EXHAUSTED, "out of memory");
  int rc = elf_check_headers(&s);
  free(s.m);
  return rc;
}

#endif
