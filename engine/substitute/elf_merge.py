"""Merge exports of two embedded-ELF executable libraries into one (an edit of one dispatch of a linked library).

IREE links the CPU dispatches of a module into one library (``<module>_linked``); an edited dispatch
source compiles to a library of its own with one export. IREE's runtime dispatches by export ordinal, so the
patched module needs one library with every export of the linked one, the edited ones replaced.

Neither library can be re-linked (IREE keeps no objects), but each is a self-contained static-PIE: its
code and data only refer to each other relative to the image, plus ``R_X86_64_RELATIVE`` relocations. So the
merged library embeds both *loaded images* whole, each page-aligned in one section (their internal PC-relative
references stay valid), turns each relative relocation into a ``.quad image + addend`` the linker relocates
again, and adds a new ``iree_hal_executable_library_query`` whose library table points at the base's
functions except the replaced ones. Assembled by LLVM (llvmlite) and linked by IREE's ``iree-lld``.

Refused (``SubstitutionError``): relocation kinds other than relative, TLS, executable-level constants, and
libraries that both import different functions.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

from engine.substitute.errors import SubstitutionError

_PT_LOAD, _PT_DYNAMIC, _PT_TLS = 1, 2, 7
_DT_NULL, _DT_RELA, _DT_RELASZ, _DT_REL, _DT_RELSZ, _DT_JMPREL, _DT_PLTRELSZ, _DT_RELR = 0, 7, 8, 17, 18, 23, 2, 36
_R_X86_64_RELATIVE = 8
_PAGE = 4096


@dataclass(frozen=True)
class LoadedImage:
    """An ELF's memory image (segments at their virtual addresses) and its relative relocations."""

    image: bytes
    relocations: tuple[tuple[int, int], ...]  # (offset, addend) of each R_X86_64_RELATIVE


def load_image(elf: bytes, what: str) -> LoadedImage:
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise SubstitutionError(f"{what}: not a 64-bit little-endian ELF")
    phoff = struct.unpack_from("<Q", elf, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    headers = [struct.unpack_from("<IIQQQQQQ", elf, phoff + i * phentsize) for i in range(phnum)]
    loads = [h for h in headers if h[0] == _PT_LOAD]
    if any(h[0] == _PT_TLS for h in headers):
        raise SubstitutionError(f"{what}: thread-local storage is not supported in a merged library")
    size = max((h[3] + h[6] for h in loads), default=0)
    image = bytearray((size + _PAGE - 1) // _PAGE * _PAGE)
    for _, _, offset, vaddr, _, filesz, _, _ in loads:
        image[vaddr : vaddr + filesz] = elf[offset : offset + filesz]
    relocations: list[tuple[int, int]] = []
    dynamic = [h for h in headers if h[0] == _PT_DYNAMIC]
    if dynamic:
        tags: dict[int, int] = {}
        pos = dynamic[0][3]
        while pos + 16 <= len(image):
            tag, value = struct.unpack_from("<qQ", image, pos)
            if tag == _DT_NULL:
                break
            tags[tag] = value
            pos += 16
        if tags.get(_DT_RELR) or tags.get(_DT_RELSZ) or tags.get(_DT_PLTRELSZ):
            raise SubstitutionError(f"{what}: relocation tables other than RELA are not supported")
        start, length = tags.get(_DT_RELA, 0), tags.get(_DT_RELASZ, 0)
        for pos in range(start, start + length, 24):
            offset, info, addend = struct.unpack_from("<QQq", image, pos)
            if info & 0xFFFFFFFF != _R_X86_64_RELATIVE:
                raise SubstitutionError(f"{what}: relocation type {info & 0xFFFFFFFF} is not supported")
            relocations.append((offset, addend))
    return LoadedImage(bytes(image), tuple(sorted(relocations)))


def _image_asm(name: str, loaded: LoadedImage) -> list[str]:
    lines = [f'.section .lens_{name},"ax",@progbits', ".p2align 12", f"{name}:"]
    data = loaded.image
    pos = 0
    for offset, addend in loaded.relocations + ((len(data), 0),):
        while pos < offset:
            chunk = data[pos : min(offset, pos + 64)]
            lines.append(".byte " + ",".join(str(b) for b in chunk))
            pos += len(chunk)
        if offset < len(data):
            lines.append(f".quad {name}+{addend}")
            pos = offset + 8
    return lines


@dataclass(frozen=True)
class _LibraryView:
    """Where the tables of a loaded library are, as offsets into its image (None for NULL)."""

    library: object  # CpuExecutableLibrary
    base: int

    def offset(self, address: int | None) -> int | None:
        return None if not address else address - self.base


def _open(elf: bytes, what: str):
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary

    try:
        library = CpuExecutableLibrary.load(elf, what)
    except Exception as e:  # noqa: BLE001 - any load failure is a refusal here
        raise SubstitutionError(f"{what}: cannot load the library to merge it: {e}") from None
    return _LibraryView(library, library.load_base)


def merge_exports(base_elf: bytes, new_elf: bytes, exports: tuple[str, ...]) -> bytes:
    """A library with every export of ``base_elf``, those named ``exports`` taken from ``new_elf``."""
    from engine.runtime.hal.cpu_abi import DispatchAttrsStruct, LibraryV0Struct
    from engine.substitute.llvm_ir import link_object

    base_view, new_view = _open(base_elf, "base library"), _open(new_elf, "replacement library")
    try:
        lib_a, lib_b = base_view.library.library_v0, new_view.library.library_v0
        if lib_a.constants_count or lib_b.constants_count:
            raise SubstitutionError("libraries with executable constants cannot be merged")
        sa, sb = _import_symbols(lib_a), _import_symbols(lib_b)
        if sa and sb and sa != sb:
            raise SubstitutionError("both libraries import functions, different ones; they cannot share one table")
        names_a = [e.name for e in base_view.library.exports]  # type: ignore[attr-defined]
        names_b = [e.name for e in new_view.library.exports]  # type: ignore[attr-defined]
        lines = [".text", ".globl iree_hal_executable_library_query",
                 ".type iree_hal_executable_library_query,@function",
                 "iree_hal_executable_library_query:", "cmpl $6, %edi", "jne 1f",
                 "leaq lens_library(%rip), %rax", "retq", "1:", "xorl %eax, %eax", "retq",
                 ".size iree_hal_executable_library_query, .-iree_hal_executable_library_query"]  # fmt: skip
        lines += _image_asm("lens_image_a", load_image(base_elf, "base library"))
        lines += _image_asm("lens_image_b", load_image(new_elf, "replacement library"))

        def ref(view: _LibraryView, address: int | None, image: str) -> str:
            off = view.offset(address)
            return "0" if off is None else f"{image}+{off}"

        n = len(names_a)
        ptrs, attrs, names, tags = [], [], [], []
        attr_size = ctypes.sizeof(DispatchAttrsStruct)
        for i, name in enumerate(names_a):
            if name in exports:
                k = names_b.index(name)
                view, lib, image, j = new_view, lib_b, "lens_image_b", k
            else:
                view, lib, image, j = base_view, lib_a, "lens_image_a", i
            ptrs.append(ref(view, lib.exports_ptrs[j], image))
            raw = bytearray(ctypes.string_at(ctypes.addressof(lib.exports_attrs[j]), attr_size))
            # Parameter reflection is dropped (its name table differs per library): no parameters.
            struct.pack_into("<H", raw, DispatchAttrsStruct.parameter_count.offset, 0)
            attrs.append(raw)
            names.append(ref(view, ctypes.cast(lib.exports_names, ctypes.POINTER(ctypes.c_void_p))[j], image))
            tag = ctypes.cast(lib.exports_tags, ctypes.POINTER(ctypes.c_void_p))[j] if lib.exports_tags else None
            tags.append(ref(view, tag, image))
        header = lib_a.header.contents
        name_address = ctypes.cast(lib_a.header, ctypes.POINTER(ctypes.c_void_p))[1]
        lines += [".section .data.rel.ro.lens,\"aw\",@progbits", ".p2align 3",
                  "lens_header:", ".long 6", ".long 0", f".quad {ref(base_view, name_address, 'lens_image_a')}",
                  f".long {header.features | lib_b.header.contents.features}", f".long {header.sanitizer}",
                  "lens_ptrs:", *[f".quad {p}" for p in ptrs],
                  "lens_attrs:", *[".byte " + ",".join(str(b) for b in a) for a in attrs],
                  ".p2align 3", "lens_names:", *[f".quad {p}" for p in names],
                  "lens_tags:", *[f".quad {p}" for p in tags]]  # fmt: skip
        if sa or sb:
            view, lib, image = (base_view, lib_a, "lens_image_a") if sa else (new_view, lib_b, "lens_image_b")
            imports = (len(sa or sb), ref(view, ctypes.cast(lib.imports_symbols, ctypes.c_void_p).value, image))
        else:
            imports = (0, "0")
        fields = {
            "header": "lens_header",
            "imports_count": str(imports[0]),
            "imports_symbols": imports[1],
            "exports_count": str(n),
            "exports_ptrs": "lens_ptrs",
            "exports_attrs": "lens_attrs",
            "exports_names": "lens_names",
            "exports_tags": "lens_tags",
        }
        lines += [".p2align 3", "lens_library:"]
        pos = 0
        for fname, _ftype in LibraryV0Struct._fields_:
            field = getattr(LibraryV0Struct, fname)
            if field.offset > pos:
                lines.append(f".zero {field.offset - pos}")
            value = fields.get(fname, "0")
            lines.append((".quad " if field.size == 8 else ".long " if field.size == 4 else ".zero ") + value)
            pos = field.offset + field.size
        if ctypes.sizeof(LibraryV0Struct) > pos:
            lines.append(f".zero {ctypes.sizeof(LibraryV0Struct) - pos}")
    finally:
        base_view.library.close()  # type: ignore[attr-defined]
        new_view.library.close()  # type: ignore[attr-defined]
    # The images hold relocated pointers in an executable, read-only section: text relocations.
    return link_object(_assemble("\n".join(lines) + "\n"), extra_flags=("-z", "notext"))


def _import_symbols(lib) -> list[bytes]:
    return [lib.imports_symbols[i] or b"" for i in range(lib.imports_count if lib.imports_symbols else 0)]


def _assemble(asm: str) -> bytes:
    """An x86-64 ELF object of GNU assembler text (LLVM's integrated assembler, through llvmlite)."""
    from engine.substitute.llvm_ir import initialize_llvm

    llvm = initialize_llvm()
    escaped = "\n".join(
        'module asm "' + line.replace("\\", "\\5C").replace('"', "\\22") + '"' for line in asm.splitlines()
    )
    ir = f'target triple = "x86_64-unknown-unknown-eabi-elf"\n{escaped}\n'
    module = llvm.parse_assembly(ir)
    tm = llvm.Target.from_triple("x86_64-unknown-unknown-eabi-elf").create_target_machine(reloc="pic", opt=0)
    return tm.emit_object(module)
