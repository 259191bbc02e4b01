/* Where an image says its functions are, for the entry-point checks of both
 * native loaders (the library query, DT_INIT and the like, each dispatch
 * function): sized STT_FUNC symbols of .symtab (which nothing loads) and the
 * code ranges of the unwind table (.eh_frame, one FDE per function, there in
 * IREE's embedded images, whose .symtab lists only the query). When the list is
 * complete (FDEs, or a .symtab that kept local functions), an entry point must
 * be the start of a listed function; otherwise (the dynamic symbols added) it
 * must not lie strictly inside one. Anything else is a symbol or pointer moved
 * off its function. Tables that are missing, out of range or in encodings not
 * read here are skipped, never a reason to refuse. */
#define _DEFAULT_SOURCE 1

#include "vmrt_elf_internal.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__linux__)

enum { SHT_SYMTAB_ = 2 };

/*---------------------------------------------------------------------------
 * Where functions are
 *---------------------------------------------------------------------------*/

typedef struct {
  uint64_t start, end;
} func_range_t;

typedef struct {
  func_range_t* items;
  size_t count, capacity;
  int complete; /* a table that lists every function was read */
} func_list_t;

/* Records [start, start+size) when it is a nonempty range inside an executable
 * segment; anything else (data, undefined, odd sizes) says nothing. */
static int add_range(const vmrt_elf_module_t* m, func_list_t* list, uint64_t start,
                     uint64_t size) {
  if (size == 0 || seg_find(m, start, size, NEED_EXEC) < 0) return 0;
  if (list->count == list->capacity) {
    size_t grown = list->capacity ? list->capacity * 2 : 64;
    func_range_t* items = (func_range_t*)realloc(list->items, grown * sizeof *items);
    if (!items) return -1;
    list->items = items;
    list->capacity = grown;
  }
  list->items[list->count].start = start;
  list->items[list->count].end = start + size;
  list->count++;
  return 0;
}

/* The SHT_SYMTAB sections (link-time symbols, in the file bytes but not loaded);
 * a table outside the file or with odd entries is not used. */
static int read_section_functions(elf_load_t* s, func_list_t* list) {
  const uint8_t* d = s->data;
  uint64_t shoff;
  uint32_t shnum;
  if (!elf_section_table(s, &shoff, &shnum)) return 0;
  for (uint32_t i = 0; i < shnum; ++i) {
    const uint8_t* h = d + shoff + (uint64_t)i * SHDR_SIZE;
    uint64_t offset = rd64(h + 24), size = rd64(h + 32), entsize = rd64(h + 56);
    if (rd32(h + 4) != SHT_SYMTAB_ || entsize != SYM_SIZE || offset > s->size ||
        size > s->size - offset || size / SYM_SIZE > MAX_SYMBOLS) {
      continue;
    }
    for (uint64_t at = offset; at + SYM_SIZE <= offset + size; at += SYM_SIZE) {
      if ((d[at + 4] & 0xfu) != STT_FUNC_) continue;
      size_t before = list->count;
      if (add_range(s->m, list, rd64(d + at + 8), rd64(d + at + 16))) return -1;
      /* Local functions listed: the table was kept whole, not stripped to exports. */
      if (list->count > before && (d[at + 4] >> 4) == 0) list->complete = 1;
    }
  }
  return 0;
}

static int by_start(const void* a, const void* b) {
  uint64_t x = ((const func_range_t*)a)->start, y = ((const func_range_t*)b)->start;
  return x < y ? -1 : x > y;
}

/*---------------------------------------------------------------------------
 * .eh_frame: the unwinder's table, one FDE per function with its code range
 *---------------------------------------------------------------------------*/

/* A bounded cursor over the file bytes of .eh_frame. */
typedef struct {
  const uint8_t* data;
  uint64_t at, end; /* offsets into data */
  uint64_t addr;    /* link-time address of data[base] */
  uint64_t base;
  int bad;
} cursor_t;

static uint64_t take(cursor_t* c, unsigned n) {
  if (c->bad || n > c->end - c->at) {
    c->bad = 1;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= (uint64_t)c->data[c->at + i] << (8 * i);
  c->at += n;
  return v;
}

static uint64_t take_uleb(cursor_t* c) {
  uint64_t v = 0;
  for (unsigned shift = 0; !c->bad; shift += 7) {
    uint64_t byte = take(c, 1);
    if (shift < 64) v |= (byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
  }
  return v;
}

/* A DW_EH_PE-encoded pointer: absolute or pc-relative, 2/4/8 bytes; any other
 * encoding makes the table unreadable here (c->bad). */
static uint64_t take_pointer(cursor_t* c, unsigned encoding, int for_range) {
  uint64_t place = c->addr + (c->at - c->base), v;
  unsigned format = encoding & 0x0fu, apply = encoding & 0x70u;
  switch (format) {
    case 0x00: case 0x04: case 0x0c: v = take(c, 8); break;
    case 0x03: v = take(c, 4); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)(uint32_t)take(c, 4); break;
    case 0x02: v = take(c, 2); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)(uint16_t)take(c, 2); break;
    default: c->bad = 1; return 0;
  }
  if (encoding & 0x80u || (apply != 0 && apply != 0x10)) c->bad = 1;
  return apply == 0x10 && !for_range ? place + v : v;
}

/* The FDE pointer encoding of the CIE at `at` (absolute 8 bytes without 'zR'),
 * or -1 when it is not a CIE this reader understands. */
static int cie_encoding(cursor_t frame, uint64_t at) {
  cursor_t c = frame;
  c.at = at;
  uint64_t length = take(&c, 4);
  if (c.bad || length == 0 || length == 0xffffffffu || length > c.end - c.at) return -1;
  c.end = c.at + length;
  uint64_t id = take(&c, 4), version = take(&c, 1);
  if (id != 0 || (version != 1 && version != 3)) return -1;
  char augmentation[8];
  size_t n = 0;
  for (uint64_t ch; (ch = take(&c, 1)) != 0 && !c.bad;) {
    if (n + 1 == sizeof augmentation) return -1;
    augmentation[n++] = (char)ch;
  }
  augmentation[n] = '\0';
  take_uleb(&c); /* code alignment */
  take_uleb(&c); /* data alignment (sleb: its bytes are skipped alike) */
  take_uleb(&c); /* return address register */
  int encoding = 0;
  if (augmentation[0] == 'z') {
    take_uleb(&c); /* augmentation data length */
    for (size_t i = 1; i < n && !c.bad; ++i) {
      if (augmentation[i] == 'R') {
        encoding = (int)take(&c, 1);
      } else if (augmentation[i] == 'P') {
        take_pointer(&c, (unsigned)take(&c, 1) & 0x0fu, 1); /* (personality: skipped) */
      } else if (augmentation[i] == 'L') {
        take(&c, 1);
      } else if (augmentation[i] != 'S' && augmentation[i] != 'B') {
        return -1;
      }
    }
  } else if (n) {
    return -1;
  }
  return c.bad ? -1 : encoding;
}

/* The section named `name`: its file offset, size and address; 0 when absent. */
static int find_section(const elf_load_t* s, const char* name, uint64_t* offset,
                        uint64_t* size, uint64_t* addr) {
  uint64_t shoff;
  uint32_t shnum;
  if (!elf_section_table(s, &shoff, &shnum)) return 0;
  uint32_t names = rd16(s->data + 62);
  if (names >= shnum) return 0;
  const uint8_t* strtab = s->data + shoff + (uint64_t)names * SHDR_SIZE;
  uint64_t str_at = rd64(strtab + 24), str_size = rd64(strtab + 32);
  if (str_at > s->size || str_size > s->size - str_at) return 0;
  size_t length = strlen(name) + 1;
  for (uint32_t i = 0; i < shnum; ++i) {
    const uint8_t* h = s->data + shoff + (uint64_t)i * SHDR_SIZE;
    uint64_t at = rd32(h);
    if (at >= str_size || length > str_size - at ||
        memcmp(s->data + str_at + at, name, length) != 0) {
      continue;
    }
    *offset = rd64(h + 24);
    *size = rd64(h + 32);
    *addr = rd64(h + 16);
    return *offset <= s->size && *size <= s->size - *offset;
  }
  return 0;
}

/* Every FDE's [pc_begin, pc_begin + pc_range); the walk stops quietly at the
 * first entry it cannot read (what came before still counts). */
static int read_unwind_functions(elf_load_t* s, func_list_t* list) {
  uint64_t offset, size, addr;
  if (!find_section(s, ".eh_frame", &offset, &size, &addr)) return 0;
  cursor_t frame = {s->data, offset, offset + size, addr, offset, 0};
  for (uint64_t at = offset; at < offset + size;) {
    cursor_t c = frame;
    c.at = at;
    uint64_t length = take(&c, 4);
    if (c.bad || length == 0 || length == 0xffffffffu || length > c.end - c.at) break;
    uint64_t next = c.at + length;
    uint64_t id = take(&c, 4);
    if (id != 0) { /* an FDE: id is the distance back to its CIE */
      int encoding = id <= at + 4 - offset ? cie_encoding(frame, at + 4 - id) : -1;
      if (encoding < 0 || encoding == 0xff) break;
      c.end = next;
      uint64_t start = take_pointer(&c, (unsigned)encoding, 0);
      uint64_t range = take_pointer(&c, (unsigned)encoding & 0x0fu, 1);
      if (c.bad) break;
      size_t before = list->count;
      if (add_range(s->m, list, start, range)) return -1;
      list->complete |= list->count > before; /* (compilers emit one FDE per function) */
    }
    at = next;
  }
  return 0;
}

/* Runs once the dynamic symbol table is known (parse_symbols). */
int elf_read_functions(elf_load_t* s) {
  vmrt_elf_module_t* m = s->m;
  func_list_t list = {NULL, 0, 0, 0};
  int failed = read_section_functions(s, &list);
  if (!failed) failed = read_unwind_functions(s, &list);
  /* The dynamic symbols only add ranges to a partial list: in a complete one,
   * a moved export's own entry would list the place it was moved to. */
  for (uint64_t i = 1; !failed && !list.complete && i < m->sym_count; ++i) {
    elf_sym_t sym;
    read_sym(m, i, &sym);
    if (sym.shndx != SHN_UNDEF_ && sym.shndx != SHN_ABS_ && (sym.info & 0xfu) == STT_FUNC_) {
      failed = add_range(m, &list, sym.value, sym.size);
    }
  }
  if (!failed && list.count) {
    qsort(list.items, list.count, sizeof *list.items, by_start);
    m->func_start = (uint64_t*)malloc(list.count * sizeof(uint64_t));
    m->func_end = (uint64_t*)malloc(list.count * sizeof(uint64_t));
    m->func_reach = (uint64_t*)malloc(list.count * sizeof(uint64_t));
    failed = !m->func_start || !m->func_end || !m->func_reach;
    for (size_t i = 0; !failed && i < list.count; ++i) {
      m->func_start[i] = list.items[i].start;
      m->func_end[i] = list.items[i].end;
      uint64_t before = i ? m->func_reach[i - 1] : 0;
      m->func_reach[i] = list.items[i].end > before ? list.items[i].end : before;
    }
    if (!failed) {
      m->func_count = list.count;
      m->func_complete = list.complete;
    }
  }
  free(list.items);
  return failed ? elf_fail(s, VMRT_ELF_EXHAUSTED, "out of memory for the function table") : 0;
}

int elf_is_entry(const vmrt_elf_module_t* m, uint64_t vaddr, uint64_t size) {
  if (seg_find(m, vaddr, 1, NEED_EXEC) < 0) return 0;
  size_t lo = 0, hi = m->func_count; /* the first start >= vaddr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->func_start[mid] < vaddr) lo = mid + 1; else hi = mid;
  }
  if (m->func_complete) {
    /* A symbol moved onto another function's start shows by its size. */
    for (size_t i = lo; i < m->func_count && m->func_start[i] == vaddr; ++i) {
      if (size == 0 || m->func_end[i] - vaddr == size) return 1;
    }
    return 0;
  }
  /* A partial list: only not strictly inside a function that starts before. */
  return lo == 0 || m->func_reach[lo - 1] <= vaddr;
}

#endif
