/* What an image for the system loader (dlopen, vmrt_executable.c) must pass
 * besides every check of vmrt's own loader (VMRT_ELF_LOAD_FOR_SYSTEM). The
 * system loader trusts its files: it follows hash chains, symbol names, notes,
 * finalizers and relocation counts without bounds, so whatever it would act on
 * is checked here first, on the image loaded and relocated by vmrt_elf.c. */
#define _DEFAULT_SOURCE 1

#include "vmrt_elf_internal.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__linux__)

enum { DT_PLTGOT_ = 3, DT_SONAME_ = 14, DT_SYMBOLIC_ = 16, DT_BIND_NOW_ = 24, DT_FLAGS_ = 30 };
#define DT_RELACOUNT_ 0x6ffffff9u
#define DT_FLAGS_1_ 0x6ffffffbu
enum { DF_TEXTREL_ = 4, DF_STATIC_TLS_ = 16 };

/* The dynamic tags the checks cover; any other (DT_NEEDED, symbol versions,
 * filters, audit libraries, text relocations, ...) is refused. */
static int tag_known(uint64_t tag) {
  switch (tag) {
    case DT_PLTRELSZ_: case DT_PLTGOT_: case DT_HASH_: case DT_STRTAB_: case DT_SYMTAB_:
    case DT_RELA_: case DT_RELASZ_: case DT_RELAENT_: case DT_STRSZ_: case DT_SYMENT_:
    case DT_INIT_: case DT_FINI_: case DT_SONAME_: case DT_SYMBOLIC_: case DT_PLTREL_:
    case DT_JMPREL_: case DT_BIND_NOW_: case DT_INIT_ARRAY_: case DT_FINI_ARRAY_:
    case DT_INIT_ARRAYSZ_: case DT_FINI_ARRAYSZ_: case DT_FLAGS_: case DT_GNU_HASH_:
    case DT_RELACOUNT_: case DT_FLAGS_1_:
      return 1;
    default:
      return 0;
  }
}

/* Whether .dynstr holds a NUL-terminated string at `offset`. */
static int dynstr_ok(const vmrt_elf_module_t* m, uint64_t offset) {
  if (offset >= m->strsz) return 0;
  const void* at = (const void*)(uintptr_t)(m->bias + m->strtab + offset);
  return memchr(at, 0, (size_t)(m->strsz - offset)) != NULL;
}

/* The system loader treats the first DT_RELACOUNT entries of DT_RELA as
 * R_X86_64_RELATIVE whatever their type says. */
static int check_relative_count(elf_load_t* s, uint64_t count) {
  uint64_t size = dyn_has(s, DT_RELASZ_) ? s->dyn[DT_RELASZ_] : 0;
  if (count > size / RELA_SIZE) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_RELACOUNT %llu exceeds the %llu DT_RELA entries",
                    ull(count), ull(size / RELA_SIZE));
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t raw[RELA_SIZE];
    img_read(s->m, s->dyn[DT_RELA_] + i * RELA_SIZE, raw, sizeof raw);
    if ((uint32_t)rd64(raw + 8) != R_RELATIVE) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_RELA entry %llu of the DT_RELACOUNT first is "
                      "not R_X86_64_RELATIVE", ull(i));
    }
  }
  return 0;
}

static int check_dynamic_tags(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t count = s->dyn_size / DYN_SIZE, relative = 0;
  /* Older system loaders relocate the dynamic section's pointers in place. */
  if (seg_find(m, s->dyn_vaddr, count * DYN_SIZE, NEED_WRITE) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "PT_DYNAMIC is not in a writable segment");
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t raw[DYN_SIZE];
    img_read(m, s->dyn_vaddr + i * DYN_SIZE, raw, sizeof raw);
    uint64_t tag = rd64(raw), value = rd64(raw + 8);
    if (tag == DT_NULL_) break;
    if (tag == DT_NEEDED_) {
      return elf_fail(s, VMRT_ELF_NOT_FOUND, "DT_NEEDED: the library needs another one "
                      "(executables cannot import)");
    }
    if (!tag_known(tag)) {
      return elf_fail(s, VMRT_ELF_INVALID, "dynamic tag %#llx is not one vmrt checks for the "
                      "system loader", ull(tag));
    }
    if (tag == DT_FLAGS_ && (value & (DF_TEXTREL_ | DF_STATIC_TLS_))) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_FLAGS %#llx asks for text relocations or "
                      "static TLS", ull(value));
    }
    if (tag == DT_SONAME_ && !dynstr_ok(m, value)) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_SONAME lies outside the string table");
    }
    if (tag == DT_PLTGOT_ && seg_find(m, value, 24, NEED_WRITE) < 0) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_PLTGOT is not in a writable segment");
    }
    if (tag == DT_RELACOUNT_) relative = value;
  }
  /* The system loader reads the companions of these tags without looking. */
  if ((dyn_has(s, DT_RELA_) && (!dyn_has(s, DT_RELASZ_) || !dyn_has(s, DT_RELAENT_))) ||
      (dyn_has(s, DT_JMPREL_) && (!dyn_has(s, DT_PLTRELSZ_) || !dyn_has(s, DT_PLTREL_)))) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_RELA or DT_JMPREL without its size, entry size "
                    "or type");
  }
  return check_relative_count(s, relative);
}

/* A present DT_HASH: buckets and chains in the image, every index a symbol, and
 * no chain that loops (the system loader would follow it forever). */
static int check_sysv_hash(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t at = s->dyn[DT_HASH_];
  uint8_t head[8];
  img_read(m, at, head, sizeof head); /* (in range: symbol_count read it) */
  uint64_t nbucket = rd32(head), nchain = rd32(head + 4);
  if (nbucket == 0 || seg_find(m, at, 8 + 4 * (nbucket + nchain), NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_HASH has no buckets or lies outside the image");
  }
  const uint8_t* table = (const uint8_t*)(uintptr_t)(m->bias + at + 8);
  const uint8_t* chain = table + 4 * nbucket;
  uint8_t* seen = (uint8_t*)calloc((size_t)(nchain / 8 + 1), 1);
  if (!seen) return elf_fail(s, VMRT_ELF_EXHAUSTED, "out of memory");
  int bad = 0;
  for (uint64_t i = 0; !bad && i < nbucket + nchain; ++i) bad = rd32(table + 4 * i) >= nchain;
  for (uint64_t b = 0; !bad && b < nbucket; ++b) {
    for (uint64_t i = rd32(table + 4 * b); !bad && i != 0; i = rd32(chain + 4 * i)) {
      bad = (seen[i / 8] >> (i % 8)) & 1u;
      seen[i / 8] |= (uint8_t)(1u << (i % 8));
    }
  }
  free(seen);
  return bad ? elf_fail(s, VMRT_ELF_INVALID, "DT_HASH chains leave the symbol table or loop")
             : 0;
}

/* A present DT_GNU_HASH (which the system loader prefers): bloom filter,
 * buckets and chains in the image, every bucket a symbol it counts, and the
 * symbol table long enough for them. `*count` is its symbol count. */
static int check_gnu_hash(elf_load_t* s, uint64_t* count) {
  const vmrt_elf_module_t* m = s->m;
  int rc = elf_gnu_hash_count(s, count);
  if (rc) return rc;
  uint8_t head[16];
  img_read(m, s->gnu_hash, head, sizeof head); /* (in range: counting read it) */
  uint64_t nbuckets = rd32(head), symoffset = rd32(head + 4), bloom = rd32(head + 8);
  uint64_t buckets = s->gnu_hash + 16 + bloom * 8, chains = buckets + nbuckets * 4;
  if (nbuckets == 0 || bloom == 0 || symoffset > *count || *count > MAX_SYMBOLS ||
      seg_find(m, s->gnu_hash + 16, bloom * 8, NEED_READ) < 0 ||
      seg_find(m, chains, (*count - symoffset) * 4, NEED_READ) < 0 ||
      seg_find(m, m->symtab, *count * SYM_SIZE, NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_GNU_HASH is malformed or out of range");
  }
  for (uint64_t b = 0; b < nbuckets; ++b) {
    uint8_t raw[4];
    img_read(m, buckets + b * 4, raw, sizeof raw);
    uint64_t first = rd32(raw);
    if (first != 0 && (first < symoffset || first >= *count)) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_GNU_HASH bucket %llu names symbol %llu of %llu",
                      ull(b), ull(first), ull(*count));
    }
  }
  return 0;
}

enum { STT_OBJECT_ = 1, STT_TLS_ = 6, STT_GNU_IFUNC_ = 10 };

/* Every symbol a hash table reaches: its name inside .dynstr (the system loader
 * compares names unbounded), no IFUNC (whose resolver it would call while
 * relocating) or TLS, and an import only as a plain global or weak symbol (a
 * local or hidden one would bind to the library's own address 0). */
static int check_symbols(elf_load_t* s, uint64_t count) {
  const vmrt_elf_module_t* m = s->m;
  for (uint64_t i = 1; i < count; ++i) {
    elf_sym_t sym;
    read_sym(m, i, &sym);
    unsigned bind = sym.info >> 4, type = sym.info & 0xfu;
    int import_ok = (bind == STB_GLOBAL_ || bind == STB_WEAK_) && (sym.other & 3u) == 0 &&
                    (type == STT_NOTYPE_ || type == STT_FUNC_ || type == STT_OBJECT_);
    if (!dynstr_ok(m, sym.name)) {
      return elf_fail(s, VMRT_ELF_INVALID, "symbol %llu's name lies outside the string table",
                      ull(i));
    }
    if (type == STT_GNU_IFUNC_ || type == STT_TLS_ || bind > STB_WEAK_ ||
        (sym.shndx == SHN_UNDEF_ && !import_ok)) {
      return elf_fail(s, VMRT_ELF_INVALID, "symbol %llu has a type, binding or visibility "
                      "vmrt does not leave to the system loader", ull(i));
    }
  }
  return 0;
}

/* Program headers the system loader reads in memory (notes, its own program
 * headers, the unwinder's table) must lie in loaded segments, and the loadable
 * ones must come in address order (it maps the span from the first to the last). */
static int check_program_headers(elf_load_t* s) {
  uint64_t last_end = 0;
  for (uint32_t i = 0; i < s->phnum; ++i) {
    elf_phdr_t p;
    elf_read_phdr(s, i, &p);
    if (p.type == PT_LOAD_) {
      if (p.vaddr < last_end) {
        return elf_fail(s, VMRT_ELF_INVALID, "loadable segment %u is not in address order", i);
      }
      last_end = p.vaddr + p.memsz;
    }
    int read_in_memory = p.type == PT_NOTE_ || p.type == PT_GNU_PROPERTY_ ||
                         p.type == PT_PHDR_ || p.type == PT_GNU_EH_FRAME_;
    if (read_in_memory && p.memsz && seg_find(s->m, p.vaddr, p.memsz, NEED_READ) < 0) {
      return elf_fail(s, VMRT_ELF_INVALID, "program header %u (type %#x) lies outside the "
                      "loaded segments", i, p.type);
    }
  }
  return 0;
}

/* The system loader makes the pages of PT_GNU_RELRO read-only (both ends
 * rounded down, as here): they may hold writable data only, never code. */
static int check_relro(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  if (!s->have_relro || s->relro_size == 0) return 0;
  uint64_t span = s->vmax - s->vmin;
  if (s->relro_vaddr < s->vmin || s->relro_size > span ||
      s->relro_vaddr - s->vmin > span - s->relro_size) {
    return elf_fail(s, VMRT_ELF_INVALID, "PT_GNU_RELRO lies outside the image");
  }
  uint64_t lo = page_down(s->relro_vaddr, s->page);
  uint64_t hi = page_down(s->relro_vaddr + s->relro_size, s->page);
  for (size_t i = 0; i < m->seg_count; ++i) {
    const elf_seg_t* g = &m->segs[i];
    uint64_t g_lo = page_down(g->vaddr, s->page), g_hi = page_up(g->vaddr + g->memsz, s->page);
    if (g_lo < hi && lo < g_hi && !(g->flags & PF_W_)) {
      return elf_fail(s, VMRT_ELF_INVALID, "PT_GNU_RELRO covers pages of a segment that is "
                      "not writable");
    }
  }
  return 0;
}

int elf_check_for_system(elf_load_t* s) {
  uint64_t count = s->m->sym_count;
  int rc = check_program_headers(s);
  if (!rc) rc = check_relro(s);
  if (!rc) rc = check_dynamic_tags(s);
  if (!rc && dyn_has(s, DT_HASH_)) rc = check_sysv_hash(s);
  if (!rc && s->have_gnu_hash) rc = check_gnu_hash(s, &count);
  if (!rc) rc = check_symbols(s, count > s->m->sym_count ? count : s->m->sym_count);
  if (!rc) rc = elf_check_entries(s, DT_FINI_, DT_FINI_ARRAY_, DT_FINI_ARRAYSZ_, "DT_FINI",
                                  "DT_FINI_ARRAY");
  return rc;
}

#endif
