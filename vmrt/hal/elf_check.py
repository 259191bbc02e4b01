"""The header and program-header checks of vmrt's ELF loaders in pure Python: the
twin of csrc/vmrt_elf_headers.c (vmrt_elf_check_headers), with the same status
codes and messages. Both native loaders run the C checks first (the embedded-elf
loader before mapping, the system-elf one before dlopen); vmrt.hal.elf.check_headers
uses this twin where the C extension is missing.
"""

from __future__ import annotations

import mmap
import struct

from vmrt.errors import HalError, StatusCode

_INVALID, _INCOMPATIBLE = StatusCode.INVALID_ARGUMENT, StatusCode.INCOMPATIBLE
_EHDR_SIZE, _PHDR_SIZE, _SHDR_SIZE = 64, 56, 64
_MAX_SPAN, _MAX_ALIGN, _MAX_LOADS = 1 << 30, 1 << 26, 64
_UINT64_MAX = (1 << 64) - 1
PT_LOAD, PT_DYNAMIC, PT_TLS = 1, 2, 7
PT_GNU_STACK, PT_GNU_RELRO = 0x6474E551, 0x6474E552
PF_X, PF_W, PF_R = 1, 2, 4
_SHT_NOBITS, _SHF_ALLOC, _SHF_TLS = 8, 2, 0x400
_PHDR = struct.Struct("<IIQQQQQQ")  # type flags offset vaddr paddr filesz memsz align
_SHDR = struct.Struct("<IIQQQQIIQQ")  # name type flags addr offset size link info align entsize


def _hex(value: int) -> str:
    """C's %#llx (no prefix for 0)."""
    return f"{value:#x}" if value else "0"


def _prot(flags: int) -> int:
    """The protection a segment maps with (write or execute imply read)."""
    return (flags & (PF_R | PF_W | PF_X)) and (PF_R | (flags & (PF_W | PF_X)))


class _Segment:
    __slots__ = ("vaddr", "memsz", "offset", "filesz", "flags")

    def __init__(self, offset, vaddr, filesz, memsz, flags):
        self.offset, self.vaddr, self.filesz, self.memsz, self.flags = (
            offset, vaddr, filesz, memsz, flags)


def _fail(message: str, code: StatusCode = _INVALID):
    raise HalError(message, code)


def _check_ident(data: memoryview) -> None:
    if len(data) < _EHDR_SIZE:
        _fail(f"{len(data)} bytes is shorter than an ELF64 header (64)")
    if bytes(data[:4]) != b"\x7fELF":
        _fail("no \\x7fELF magic")
    if data[4] == 1:
        _fail("32-bit ELF (ELFCLASS32); x86-64 needs ELFCLASS64", _INCOMPATIBLE)
    if data[4] != 2:
        _fail(f"unknown ELF class {data[4]}")
    if data[5] == 2:
        _fail("big-endian ELF; x86-64 is little-endian", _INCOMPATIBLE)
    if data[5] != 1:
        _fail(f"unknown ELF data encoding {data[5]}")
    if data[6] != 1:
        _fail(f"ELF identification version {data[6]}, not 1")


def _check_ehdr(data: memoryview) -> tuple[int, int]:
    """(program header offset, count)."""
    _check_ident(data)
    e_type, machine, version = struct.unpack_from("<HHI", data, 16)
    if version != 1:
        _fail(f"ELF version {version}, not 1")
    if machine != 62:
        _fail(f"ELF machine {machine} is not x86-64 (62)", _INCOMPATIBLE)
    if e_type != 3:
        _fail(f"ELF type {e_type} is not a shared object (ET_DYN)")
    ehsize, phentsize, phnum = struct.unpack_from("<HHH", data, 52)
    if ehsize != _EHDR_SIZE or phentsize != _PHDR_SIZE:
        _fail(f"header size {ehsize} / program header size {phentsize}, not 64 / 56")
    phoff = struct.unpack_from("<Q", data, 32)[0]
    if phnum in (0, 0xFFFF):
        _fail(f"program header count {phnum} unsupported")
    if phoff > len(data) or phnum * _PHDR_SIZE > len(data) - phoff:
        _fail(f"program headers (offset {phoff}, {phnum} entries) lie outside the "
              f"{len(data)}-byte image")
    return phoff, phnum


def _take_load(i, fields, size, page, for_system, segments) -> int:
    """Checks one PT_LOAD and records it; returns its alignment."""
    _, flags, offset, vaddr, _, filesz, memsz, align = fields
    if flags & PF_W and flags & PF_X:
        _fail(f"segment {i} asks to be writable and executable")
    if filesz > memsz:
        _fail(f"segment {i} has filesz {filesz} > memsz {memsz}")
    if offset > size or filesz > size - offset:
        _fail(f"segment {i} file bytes [{offset}, +{filesz}) lie outside the {size}-byte image")
    if memsz > _MAX_SPAN or vaddr > _UINT64_MAX - memsz - _MAX_ALIGN:
        _fail(f"segment {i} [{_hex(vaddr)}, +{memsz}) is out of range")
    if align & (align - 1) or align > _MAX_ALIGN:
        _fail(f"segment {i} alignment {align} unsupported")
    modulus = page if for_system and align < page else align
    if modulus > 1 and (vaddr - offset) % modulus:
        _fail(f"segment {i} offset {_hex(offset)} and address {_hex(vaddr)} differ modulo "
              f"{modulus}")
    if flags & PF_X and filesz != memsz:
        _fail(f"executable segment {i} has {filesz} file bytes of {memsz} (its code would end "
              "in zeros)")
    if memsz:
        if len(segments) == _MAX_LOADS:
            _fail(f"more than {_MAX_LOADS} loadable segments")
        segments.append(_Segment(offset, vaddr, filesz, memsz, flags))
    return align


def _scan_phdrs(data, phoff, phnum, page, for_system) -> list[_Segment]:
    segments: list[_Segment] = []
    seen = set()
    for i in range(phnum):
        fields = _PHDR.unpack_from(data, phoff + i * _PHDR_SIZE)
        p_type, flags = fields[0], fields[1]
        if p_type == PT_LOAD:
            _take_load(i, fields, len(data), page, for_system, segments)
        elif p_type in (PT_DYNAMIC, PT_GNU_RELRO):
            if p_type in seen:
                _fail("more than one " + ("PT_DYNAMIC" if p_type == PT_DYNAMIC
                                          else "PT_GNU_RELRO"))
            seen.add(p_type)
        elif p_type == PT_TLS:
            _fail("thread-local storage (PT_TLS) is unsupported")
        elif p_type == PT_GNU_STACK and flags & PF_X and for_system:
            _fail("PT_GNU_STACK asks for an executable stack")
    if not segments:
        _fail("no loadable segment")
    return segments


def _check_layout(segments: list[_Segment], page: int) -> None:
    def page_span(g):
        return g.vaddr & ~(page - 1), (g.vaddr + g.memsz + page - 1) & ~(page - 1)

    spans = [page_span(g) for g in segments]
    low, high = min(lo for lo, _ in spans), max(hi for _, hi in spans)
    if high - low > _MAX_SPAN:
        _fail(f"segments span {high - low} bytes, more than 1 GiB")
    for i, a in enumerate(segments):
        for j in range(i + 1, len(segments)):
            b = segments[j]
            if a.vaddr < b.vaddr + b.memsz and b.vaddr < a.vaddr + a.memsz:
                _fail(f"loadable segments overlap at {_hex(max(a.vaddr, b.vaddr))}")
            if a.offset < b.offset + b.filesz and b.offset < a.offset + a.filesz:
                _fail(f"loadable segments share file bytes at {max(a.offset, b.offset)}")
            (a_lo, a_hi), (b_lo, b_hi) = spans[i], spans[j]
            if a_lo < b_hi and b_lo < a_hi and _prot(a.flags) != _prot(b.flags):
                _fail("segments with different permissions share a page")


def _holding(segments: list[_Segment], vaddr: int, length: int) -> _Segment | None:
    """The segment holding [vaddr, vaddr+length) whole (C's seg_find)."""
    for g in segments:
        if not (vaddr < g.vaddr or length > g.memsz or vaddr - g.vaddr > g.memsz - length):
            return g
    return None


def _check_sections_agree(data: memoryview, segments: list[_Segment]) -> None:
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    if shentsize != _SHDR_SIZE or shoff > len(data) or shnum * _SHDR_SIZE > len(data) - shoff:
        return  # optional, and unusable: ignored as the C loader ignores it
    for i in range(shnum):
        _, sh_type, flags, addr, offset, size, *_ = _SHDR.unpack_from(data,
                                                                     shoff + i * _SHDR_SIZE)
        if not flags & _SHF_ALLOC or flags & _SHF_TLS or not size:
            continue
        g = _holding(segments, addr, size)
        if g is None:
            _fail(f"section {i} [{_hex(addr)}, +{size}) is in no loadable segment")
        if sh_type == _SHT_NOBITS or addr - g.vaddr + size > g.filesz:
            continue
        expected = g.offset + (addr - g.vaddr)
        if offset != expected:
            _fail(f"section {i} (at {_hex(addr)}) is at file offset {offset} but its segment "
                  f"loads it from {expected}")


def check_headers(data, *, for_system: bool = False) -> None:
    """Raises HalError (INVALID_ARGUMENT or INCOMPATIBLE) when the ELF header, program
    headers, segment layout or section placement would make vmrt refuse the image;
    `for_system` adds what the system loader needs (csrc/vmrt_elf.h,
    VMRT_ELF_LOAD_FOR_SYSTEM)."""
    with memoryview(data) as raw, raw.cast("B") as view:
        phoff, phnum = _check_ehdr(view)
        segments = _scan_phdrs(view, phoff, phnum, mmap.PAGESIZE, for_system)
        _check_layout(segments, mmap.PAGESIZE)
        _check_sections_agree(view, segments)
