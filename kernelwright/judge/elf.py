"""What a built extension links against, read from its ELF file with the standard library alone
(GPU machines need not have readelf or nm): the libraries it needs (DT_NEEDED), the symbols it
leaves undefined (calls into other libraries) and the symbols it defines.

Only 64-bit little-endian ELF is read (Linux on x86-64 and aarch64); anything else yields
`ElfError`, and the caller says it could not look.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

SHT_SYMTAB, SHT_DYNAMIC, SHT_DYNSYM = 2, 6, 11
DT_NULL, DT_NEEDED = 0, 1
SHN_UNDEF = 0


class ElfError(ValueError):
    """Not a readable 64-bit little-endian ELF file."""


@dataclass
class ElfInfo:
    needed: list[str] = field(default_factory=list)
    undefined: set[str] = field(default_factory=set)
    defined: set[str] = field(default_factory=set)


@dataclass
class _Section:
    type: int
    offset: int
    size: int
    link: int
    entsize: int


def read_elf(path: str | Path) -> ElfInfo:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 64:
        raise ElfError(f"{path} is not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path} is not 64-bit little-endian ELF")
    sections = _sections(data)
    info = ElfInfo()
    for section in sections:
        if section.type in (SHT_DYNSYM, SHT_SYMTAB):
            _symbols(data, section, sections[section.link], info)
        elif section.type == SHT_DYNAMIC:
            info.needed += _needed(data, section, sections[section.link])
    return info


def _sections(data: bytes) -> list[_Section]:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ElfError("no readable section table")
    found = []
    for index in range(shnum):
        (_, kind, _, _, offset, size, link, _, _, entsize) = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + index * shentsize)
        found.append(_Section(kind, offset, size, link, entsize))
    return found


def _string(data: bytes, table: _Section, offset: int) -> str:
    start = table.offset + offset
    end = data.find(b"\0", start, table.offset + table.size)
    return data[start:end if end >= 0 else table.offset + table.size].decode("utf-8", "replace")


def _symbols(data: bytes, section: _Section, strings: _Section, info: ElfInfo) -> None:
    size = section.entsize or 24
    for offset in range(section.offset, section.offset + section.size - size + 1, size):
        name_offset, _, _, shndx = struct.unpack_from("<IBBH", data, offset)
        if not name_offset:
            continue
        name = _string(data, strings, name_offset)
        (info.undefined if shndx == SHN_UNDEF else info.defined).add(name)


def _needed(data: bytes, section: _Section, strings: _Section) -> list[str]:
    needed = []
    for offset in range(section.offset, section.offset + section.size - 15, 16):
        tag, value = struct.unpack_from("<qQ", data, offset)
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed.append(_string(data, strings, value))
    return needed
