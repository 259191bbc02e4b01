/* ELF loader for IREE's embedded-elf-x86_64 executables (see vmrt_elf.h), whose
 * checks system-elf images pass too before the system loader sees them.
 *
 * The image is untrusted input: every value read from it is range-checked
 * before it is used as an offset, size or address, all arithmetic on such
 * values is unsigned and overflow-checked, and every multi-byte field is read
 * with memcpy (input and image may be unaligned). The steps follow IREE's own
 * loader (runtime/src/iree/hal/local/elf): check the headers
 * (vmrt_elf_headers.c), reserve one PROT_NONE span, copy PT_LOAD segments in
 * read-write, parse PT_DYNAMIC, learn where functions are
 * (vmrt_elf_functions.c), refuse imports, apply RELA/JMPREL relocations, check
 * entry points (and, for the system loader, vmrt_elf_system.c), set final
 * protections (never write+execute), make PT_GNU_RELRO read-only, then run
 * DT_INIT and DT_INIT_ARRAY. */
#define _DEFAULT_SOURCE 1

#include "vmrt_elf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmrt_elf_internal.h"

#if defined(__x86_64__) && defined(__linux__)

int elf_fail(elf_load_t* s, int code, const char* format, ...) {
  if (s->error && s->error_capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(s->error, s->error_capacity, format, args);
    va_end(args);
  }
  return code;
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
    return elf_fail(s, VMRT_ELF_EXHAUSTED, "reserving %zu bytes failed (errno %d)", span + extra,
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
  m->size = m->span = span;
  m->bias = base - (uintptr_t)s->vmin;
  return 0;
}

static int protect_range(elf_load_t* s, uint64_t lo, uint64_t hi, int prot) {
  /* lo/hi are page-aligned link-time addresses inside the span. */
  if (hi <= lo) return 0;
  if (mprotect((void*)(uintptr_t)(s->m->bias + lo), (size_t)(hi - lo), prot) != 0) {
    return elf_fail(s, VMRT_ELF_EXHAUSTED, "mprotect of %llu bytes failed (errno %d)",
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
    return elf_fail(s, VMRT_ELF_INVALID, "DT_REL relocations are unsupported (x86-64 uses RELA)");
  }
  if (dyn_has(s, DT_RELR_) || dyn_has(s, DT_RELRSZ_)) {
    return elf_fail(s, VMRT_ELF_INVALID, "packed DT_RELR relocations are unsupported");
  }
  if (dyn_has(s, DT_RELAENT_) && s->dyn[DT_RELAENT_] != RELA_SIZE) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_RELAENT %llu, not 24", ull(s->dyn[DT_RELAENT_]));
  }
  if (dyn_has(s, DT_SYMENT_) && s->dyn[DT_SYMENT_] != SYM_SIZE) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_SYMENT %llu, not 24", ull(s->dyn[DT_SYMENT_]));
  }
  if (dyn_has(s, DT_PLTREL_) && s->dyn[DT_PLTREL_] != DT_RELA_) {
    return elf_fail(s, VMRT_ELF_INVALID, "DT_PLTREL %llu, only DT_RELA is supported",
                    ull(s->dyn[DT_PLTREL_]));
  }
  return 0;
}

static int parse_dynamic(elf_load_t* s) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t count = s->dyn_size / DYN_SIZE;
  if (!s->have_dynamic || count == 0) return elf_fail(s, VMRT_ELF_INVALID, "no PT_DYNAMIC");
  if (seg_find(m, s->dyn_vaddr, count * DYN_SIZE, NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "PT_DYNAMIC [%#llx, +%llu) lies outside the loaded "
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
int elf_gnu_hash_count(elf_load_t* s, uint64_t* out) {
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
  return elf_fail(s, VMRT_ELF_INVALID, "DT_GNU_HASH table is malformed or out of range");
}

static int symbol_count(elf_load_t* s, uint64_t* out) {
  const vmrt_elf_module_t* m = s->m;
  if (dyn_has(s, DT_HASH_)) {
    /* DT_HASH is nbucket, nchain, ...; nchain equals the number of symbols. */
    uint8_t raw[8];
    if (seg_find(m, s->dyn[DT_HASH_], sizeof raw, NEED_READ) < 0) {
      return elf_fail(s, VMRT_ELF_INVALID, "DT_HASH lies outside the loaded segments");
    }
    img_read(m, s->dyn[DT_HASH_], raw, sizeof raw);
    *out = rd32(raw + 4);
    return 0;
  }
  if (s->have_gnu_hash) return elf_gnu_hash_count(s, out);
  return elf_fail(s, VMRT_ELF_INVALID, "no DT_HASH or DT_GNU_HASH to size the symbol table");
}

static int parse_symbols(elf_load_t* s) {
  vmrt_elf_module_t* m = s->m;
  if (!dyn_has(s, DT_SYMTAB_) || !dyn_has(s, DT_STRTAB_) || !dyn_has(s, DT_STRSZ_) ||
      s->dyn[DT_STRSZ_] == 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "no dynamic symbol table (DT_SYMTAB/DT_STRTAB/DT_STRSZ)");
  }
  uint64_t count = 0;
  int rc = symbol_count(s, &count);
  if (rc) return rc;
  if (count == 0 || count > MAX_SYMBOLS) {
    return elf_fail(s, VMRT_ELF_INVALID, "symbol count %llu unsupported", ull(count));
  }
  if (seg_find(m, s->dyn[DT_SYMTAB_], count * SYM_SIZE, NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "symbol table (%llu entries at %#llx) lies outside the "
                    "loaded segments", ull(count), ull(s->dyn[DT_SYMTAB_]));
  }
  if (seg_find(m, s->dyn[DT_STRTAB_], s->dyn[DT_STRSZ_], NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "string table lies outside the loaded segments");
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
    return elf_fail(s, VMRT_ELF_NOT_FOUND, "undefined symbol '%s' (embedded executables cannot "
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
      return elf_fail(s, VMRT_ELF_INVALID, "unsupported x86-64 relocation type %u", type);
  }
  return elf_fail(s, VMRT_ELF_INVALID, "relocation type %u without a symbol", type);
}

static int apply_rela(elf_load_t* s, const uint8_t raw[RELA_SIZE]) {
  const vmrt_elf_module_t* m = s->m;
  uint64_t offset = rd64(raw), info = rd64(raw + 8), addend = rd64(raw + 16);
  uint32_t type = (uint32_t)info;
  uint64_t sym_index = info >> 32, S = 0, value = 0;
  unsigned width = 8;
  int for_system = (s->flags & VMRT_ELF_LOAD_FOR_SYSTEM) != 0;
  /* The system loader computes 32-bit values with its own load address (which
   * may overflow where ours did not), copies whole symbols for R_COPY, and takes
   * the first DT_RELACOUNT entries as R_RELATIVE whatever they say: only 64-bit
   * relocations of writable data are left to it. */
  if (for_system && type != R_64 && type != R_RELATIVE && type != R_GLOB_DAT &&
      type != R_JUMP_SLOT) {
    return elf_fail(s, VMRT_ELF_INVALID, "relocation type %u is not one vmrt leaves to the "
                    "system loader", type);
  }
  if (type == R_NONE) return 0;
  if (sym_index) {
    if (sym_index >= m->sym_count) {
      return elf_fail(s, VMRT_ELF_INVALID, "relocation at %#llx names symbol %llu of %llu",
                      ull(offset), ull(sym_index), ull(m->sym_count));
    }
    elf_sym_t sym;
    read_sym(m, sym_index, &sym);
    S = sym.shndx == SHN_ABS_ ? sym.value : (uint64_t)m->bias + sym.value;
  }
  int rc = reloc_value(s, type, sym_index, S, addend, (uint64_t)m->bias + offset, &value, &width);
  if (rc > 0) return rc;
  if (rc < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "relocation type %u at %#llx overflows 32 bits", type,
                    ull(offset));
  }
  /* During relocation every segment is read-write here, so any one may be
   * patched; the system loader only writes where the segment is writable. */
  if (seg_find(m, offset, width, for_system ? NEED_WRITE : NEED_ANY) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "relocation target %#llx (+%u) lies outside the loaded "
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
    return elf_fail(s, VMRT_ELF_INVALID, "%s table (%#llx, %llu bytes) is malformed or outside "
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
    return elf_fail(s, VMRT_ELF_INVALID, "PT_GNU_RELRO lies outside the image");
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
  return elf_is_entry(m, address - (uint64_t)m->bias, 0);
}

/* Checks that the function of `fn_tag` (a link-time address) and every entry of
 * the array of `array_tag` (absolute addresses once relocated; 0 and -1 mean
 * "none") are entry points: DT_INIT and DT_INIT_ARRAY, or DT_FINI and DT_FINI_ARRAY. */
int elf_check_entries(elf_load_t* s, unsigned fn_tag, unsigned array_tag, unsigned size_tag,
                      const char* fn_name, const char* array_name) {
  const vmrt_elf_module_t* m = s->m;
  if (dyn_has(s, fn_tag) && s->dyn[fn_tag] != 0 && !elf_is_entry(m, s->dyn[fn_tag], 0)) {
    return elf_fail(s, VMRT_ELF_INVALID, "%s %#llx is not the start of code in an executable "
                    "segment", fn_name, ull(s->dyn[fn_tag]));
  }
  uint64_t size = dyn_has(s, size_tag) ? s->dyn[size_tag] : 0;
  if (size == 0) return 0;
  uint64_t array = s->dyn[array_tag];
  if (!dyn_has(s, array_tag) || size % 8 != 0 || seg_find(m, array, size, NEED_READ) < 0) {
    return elf_fail(s, VMRT_ELF_INVALID, "%s is malformed or outside the image", array_name);
  }
  for (uint64_t at = 0; at < size; at += 8) {
    uint8_t raw[8];
    img_read(m, array + at, raw, sizeof raw);
    uint64_t entry = rd64(raw);
    if (entry == 0 || entry == UINT64_MAX) continue;
    if (!init_target_ok(m, entry)) {
      return elf_fail(s, VMRT_ELF_INVALID, "%s entry %llu is not the start of code in an "
                      "executable segment", array_name, ull(at / 8));
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
  int rc = elf_check_headers(s);
  if (!rc) rc = reserve_span(s);
  if (!rc) rc = copy_segments(s);
  if (!rc) rc = parse_dynamic(s);
  if (!rc) rc = parse_symbols(s);
  if (!rc) rc = elf_read_functions(s);
  /* A system image may leave symbols (libm's, say) for the system loader to bind
   * in the process; relocations against them are checked all the same. */
  if (!rc && !(s->flags & VMRT_ELF_LOAD_FOR_SYSTEM)) rc = check_no_imports(s);
  if (!rc) rc = apply_table(s, DT_RELA_, DT_RELASZ_, "DT_RELA");
  if (!rc) rc = apply_table(s, DT_JMPREL_, DT_PLTRELSZ_, "DT_JMPREL");
  if (!rc) rc = elf_check_entries(s, DT_INIT_, DT_INIT_ARRAY_, DT_INIT_ARRAYSZ_, "DT_INIT",
                                  "DT_INIT_ARRAY");
  if (!rc && (s->flags & VMRT_ELF_LOAD_FOR_SYSTEM)) rc = elf_check_for_system(s);
  if (!rc) rc = protect_segments(s);
  return rc;
}

int vmrt_elf_load_ex(const uint8_t* data, size_t size, uint32_t flags,
                     vmrt_elf_module_t** out_module, char* error, size_t error_capacity) {
  elf_load_t s;
  elf_state_init(&s, data, size, flags, error, error_capacity);
  if (!out_module) return elf_fail(&s, VMRT_ELF_INVALID, "no output pointer");
  *out_module = NULL;
  s.m = (vmrt_elf_module_t*)calloc(1, sizeof *s.m);
  if (!s.m) return elf_fail(&s, VMRT_ELF_EXHAUSTED, "out of memory");
  s.m->owns_mapping = 1;
  int rc = load_steps(&s);
  if (rc) {
    vmrt_elf_unload(s.m);
    return rc;
  }
  if (!(flags & (VMRT_ELF_LOAD_NO_INITIALIZERS | VMRT_ELF_LOAD_FOR_SYSTEM))) {
    run_initializers(&s);
  }
  *out_module = s.m;
  return 0;
}

/* Exported means: defined in the image (not absolute or common), global or
 * weak, default or protected visibility, a function (or untyped label): 1 when
 * its address is an entry point (elf_is_entry), -1 when it is not. */
static int exported_function(const vmrt_elf_module_t* m, const elf_sym_t* sym) {
  unsigned bind = sym->info >> 4, type = sym->info & 0xfu, vis = sym->other & 3u;
  if (sym->shndx == SHN_UNDEF_ || sym->shndx == SHN_ABS_ || sym->shndx == SHN_COMMON_) return 0;
  if (bind != STB_GLOBAL_ && bind != STB_WEAK_) return 0;
  if (type != STT_FUNC_ && type != STT_NOTYPE_) return 0;
  if (vis != STV_DEFAULT_ && vis != STV_PROTECTED_) return 0;
  return elf_is_entry(m, sym->value, sym->size) ? 1 : -1;
}

int vmrt_elf_find(vmrt_elf_module_t* m, const char* name, void** out) {
  *out = NULL;
  if (!m || !name || !m->size) return VMRT_ELF_NOT_FOUND;
  size_t length = strlen(name);
  void* weak = NULL;
  int misplaced = 0;
  for (uint64_t i = 1; i < m->sym_count; ++i) {
    elf_sym_t sym;
    read_sym(m, i, &sym);
    /* Compare within .dynstr only (the name plus its NUL must fit). */
    if (sym.name >= m->strsz || length >= m->strsz - sym.name) continue;
    const char* candidate = (const char*)(uintptr_t)(m->bias + m->strtab + sym.name);
    if (memcmp(candidate, name, length + 1) != 0) continue;
    int exported = exported_function(m, &sym);
    misplaced |= exported < 0;
    if (exported <= 0) continue;
    void* address = (void*)(uintptr_t)(m->bias + sym.value);
    if ((sym.info >> 4) == STB_GLOBAL_) {
      *out = address;
      return 0;
    }
    if (!weak) weak = address;
  }
  *out = weak;
  return weak ? 0 : misplaced ? VMRT_ELF_INVALID : VMRT_ELF_NOT_FOUND;
}

void* vmrt_elf_lookup(vmrt_elf_module_t* m, const char* name) {
  void* address;
  return vmrt_elf_find(m, name, &address) ? NULL : address;
}

size_t vmrt_elf_readable(const vmrt_elf_module_t* m, const void* address) {
  if (!m || !m->size) return 0;
  uint64_t vaddr = (uint64_t)(uintptr_t)address - (uint64_t)m->bias;
  int k = seg_find(m, vaddr, 1, NEED_READ);
  return k < 0 ? 0 : (size_t)(m->segs[k].vaddr + m->segs[k].memsz - vaddr);
}

int vmrt_elf_is_entry(const vmrt_elf_module_t* m, const void* address) {
  return m && m->size && elf_is_entry(m, (uint64_t)(uintptr_t)address - (uint64_t)m->bias, 0);
}

void vmrt_elf_detach(vmrt_elf_module_t* m) {
  if (!m || !m->owns_mapping) return;
  if (m->size) munmap((void*)m->base, m->size);
  m->owns_mapping = 0;
  m->size = 0; /* nothing may be read until vmrt_elf_attach */
}

void vmrt_elf_attach(vmrt_elf_module_t* m, uintptr_t bias) {
  if (!m || m->owns_mapping) return;
  uintptr_t vmin = m->base - m->bias;
  m->size = m->span;
  m->base = bias + vmin;
  m->bias = bias;
}

void vmrt_elf_unload(vmrt_elf_module_t* m) {
  if (!m) return;
  if (m->owns_mapping && m->size) munmap((void*)m->base, m->size);
  free(m->func_start);
  free(m->func_end);
  free(m->func_reach);
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
int vmrt_elf_find(vmrt_elf_module_t* m, const char* name, void** out) {
  (void)m; (void)name; *out = NULL; return VMRT_ELF_NOT_FOUND;
}
void vmrt_elf_unload(vmrt_elf_module_t* m) { (void)m; }
int vmrt_elf_is_entry(const vmrt_elf_module_t* m, const void* address) {
  (void)m; (void)address; return 0;
}
size_t vmrt_elf_readable(const vmrt_elf_module_t* m, const void* address) {
  (void)m; (void)address; return 0;
}
void vmrt_elf_detach(vmrt_elf_module_t* m) { (void)m; }
void vmrt_elf_attach(vmrt_elf_module_t* m, uintptr_t bias) { (void)m; (void)bias; }
int vmrt_elf_check_headers(const uint8_t* data, size_t size, uint32_t flags, char* error,
                           size_t error_capacity) {
  (void)data; (void)size; (void)flags;
  if (error && error_capacity) {
    snprintf(error, error_capacity, "ELF executables need an x86-64 Linux host");
  }
  return VMRT_ELF_UNAVAILABLE;
}
uintptr_t vmrt_elf_base(vmrt_elf_module_t* m) { (void)m; return 0; }
size_t vmrt_elf_size(vmrt_elf_module_t* m) { (void)m; return 0; }

#endif

int vmrt_elf_load(const uint8_t* data, size_t size, vmrt_elf_module_t** out_module,
                  char* error, size_t error_capacity) {
  return vmrt_elf_load_ex(data, size, 0, out_module, error, error_capacity);
}
