"""Call stacks from an instruction trace: exact flame graphs, no sampling.

Every committed instruction is attributed to the stack it ran in. The stack is rebuilt from the
trace alone, with the binaries' symbols (pyelftools) and instructions (capstone):

- a call instruction followed by a jump elsewhere pushes the target's function, remembering
  the return address (the call's address + its size);
- an address equal to a remembered return address pops back to that frame (a return, or a
  longjmp over several frames);
- any other move into another function (a tail call, a fall-through, a jump to a .cold part)
  renames the top frame.

Addresses outside the given binaries count under a ``[unknown]`` frame (with a statically
linked program there are none). Weights are the trace's cycles, or 1 per instruction.
With `inline`, each frame is split into the functions inlined at its address (addr2line -i
reads them from DWARF, once per distinct address at the end). `load_trace` streams a trace
file (plain or .gz) through it.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from autoprof.errors import AutoprofError
from autoprof.flame.fold import Folded, Stack
from autoprof.flame.inline import pairs_to_frames
from autoprof.flame.trace import Step, TraceReport, sniff, steps

__all__ = ["UNKNOWN", "Binary", "Unwinder", "load_trace"]

UNKNOWN = "[unknown]"
_MAX_INSN = 16  # the longest x86 instruction; RISC-V's are 2 or 4 bytes
_BRANCH_GROUPS = (1, 2, 3, 4, 5, 7)  # capstone's JUMP, CALL, RET, INT, IRET, BRANCH_RELATIVE


@dataclass(frozen=True)
class _Insn:
    size: int
    call: bool
    branch: bool  # it may go elsewhere than the next instruction


@dataclass
class Binary:
    """One ELF: its functions (sorted by address) and its code, decoded on demand."""

    path: Path
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    segments: list[tuple[int, bytes]] = field(default_factory=list)  # executable, by address
    arch: str = "x86-64"
    _sections: list[tuple[int, int]] = field(default_factory=list)  # executable, [start, end)

    @classmethod
    def load(cls, path: Path) -> Binary:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        try:
            with path.open("rb") as stream:
                elf = ELFFile(stream)
                binary = cls(path, arch=elf.get_machine_arch())
                binary._read(elf)
        except OSError as err:
            raise AutoprofError(f"cannot read --binary {path}: {err.strerror}") from None
        except ELFError as err:
            raise AutoprofError(f"--binary {path} is not an ELF file: {err}") from None
        if not binary.starts:
            raise AutoprofError(f"--binary {path} has no function symbols (stripped?)")
        return binary

    def _read(self, elf: Any) -> None:  # pyelftools is untyped
        from elftools.elf.sections import SymbolTableSection

        functions: dict[int, tuple[int, int, str]] = {}  # start -> (rank, size, name)
        for section in elf.iter_sections():
            if not isinstance(section, SymbolTableSection):
                continue
            for symbol in section.iter_symbols():
                if symbol["st_info"]["type"] != "STT_FUNC" or not symbol["st_value"]:
                    continue
                # one name per address: a global one before a weak or local alias
                rank = {"STB_GLOBAL": 0, "STB_WEAK": 1}.get(symbol["st_info"]["bind"], 2)
                start = symbol["st_value"]
                if start not in functions or rank < functions[start][0]:
                    functions[start] = (rank, symbol["st_size"], symbol.name)
        # code without a symbol (.init's, .plt's stubs) is named for its section: [.plt]
        for section in elf.iter_sections():
            if section["sh_flags"] & 0x4 and section["sh_addr"]:  # SHF_EXECINSTR
                start = section["sh_addr"]
                functions.setdefault(start, (3, section["sh_size"], f"[{section.name}]"))
                self._sections.append((start, start + section["sh_size"]))
        order = sorted(functions)
        for i, start in enumerate(order):
            _, size, name = functions[start]
            # an assembly symbol without a size runs to the next symbol or its section's end
            end = start + size if size else self._section_end(start)
            if i + 1 < len(order) and not size:
                end = min(end, order[i + 1])
            self.starts.append(start)
            self.ends.append(end)
            self.names.append(name)
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_LOAD" and segment["p_flags"] & 1:  # PF_X
                self.segments.append((segment["p_vaddr"], segment.data()))

    def _section_end(self, address: int) -> int:
        return next((end for start, end in self._sections if start <= address < end), address + 1)

    def function(self, address: int) -> str | None:
        """The function holding `address` (None when no symbol covers it)."""
        i = bisect.bisect_right(self.starts, address) - 1
        if i >= 0 and address < self.ends[i]:
            return self.names[i]
        return None

    def is_entry(self, address: int) -> bool:
        i = bisect.bisect_left(self.starts, address)
        return i < len(self.starts) and self.starts[i] == address

    def covers(self, address: int) -> bool:
        return any(base <= address < base + len(code) for base, code in self.segments)

    @cached_property
    def _disassembler(self) -> Any:  # capstone is untyped
        import capstone  # no stubs: typed as Any by the mypy config

        modes = {
            "x64": (capstone.CS_ARCH_X86, capstone.CS_MODE_64),
            "x86": (capstone.CS_ARCH_X86, capstone.CS_MODE_32),
            "RISC-V": (capstone.CS_ARCH_RISCV, capstone.CS_MODE_RISCV64 | capstone.CS_MODE_RISCVC),
            "AArch64": (capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM),
        }
        if self.arch not in modes:
            raise AutoprofError(f"--binary {self.path}: cannot decode {self.arch} instructions")
        disassembler = capstone.Cs(*modes[self.arch])
        disassembler.detail = True
        return disassembler

    def decode(self, address: int) -> _Insn | None:
        """The instruction at `address` (None outside the code or when it does not decode)."""
        for base, code in self.segments:
            if base <= address < base + len(code):
                offset = address - base
                for insn in self._disassembler.disasm(
                    code[offset : offset + _MAX_INSN], address, 1
                ):
                    branch = any(insn.group(g) for g in _BRANCH_GROUPS)
                    return _Insn(insn.size, self._is_call(insn), branch)
        return None

    def _is_call(self, insn: Any) -> bool:
        import capstone  # no stubs: typed as Any by the mypy config

        if insn.group(capstone.CS_GRP_CALL):
            return True
        # RISC-V: jal/jalr that link into ra (x1) are calls; capstone does not group them
        return (
            self.arch == "RISC-V"
            and insn.mnemonic in ("jal", "jalr", "c.jal", "c.jalr")
            and (
                insn.op_str.startswith("ra")
                or insn.mnemonic.startswith("c.")
                or "," not in insn.op_str
            )
        )


class Unwinder:
    """Folds a trace's steps into stacks rooted at `root` (the program's name)."""

    def __init__(self, binaries: Iterable[Binary], root: str, inline: bool = False) -> None:
        self.binaries = list(binaries)
        self.root = root
        self.inline = inline
        self._insns: dict[int, _Insn | None] = {}
        self._functions: dict[int, str] = {}
        self.instructions = 0
        self.gaps = 0  # sequential instructions that skipped ahead: a trace of blocks

    def _binary(self, address: int) -> Binary | None:
        return next((b for b in self.binaries if b.covers(address)), None)

    def _insn(self, address: int) -> _Insn | None:
        if address not in self._insns:
            binary = self._binary(address)
            self._insns[address] = binary.decode(address) if binary else None
        return self._insns[address]

    def _function(self, address: int) -> str:
        name = self._functions.get(address)
        if name is None:
            binary = self._binary(address)
            found = binary.function(address) if binary else None
            name = self._functions[address] = found or UNKNOWN
        return name

    def fold(self, trace: Iterable[Step], event: str | None = None) -> Folded:
        """The stacks of `trace`, weighted by cycles (or instructions when it has none)."""
        folded = Folded()
        stacks = folded.stacks
        names: list[str] = []  # the frames, root first
        returns: list[int] = []  # returns[i]: where the call that made names[i + 1] returns
        key: Stack = (self.root,)
        previous: _Insn | None = None
        here = after = -1  # the previous instruction's address, and the one after it
        cycles_seen = False
        placed: dict[tuple[Stack, tuple[int, ...], int], int] = {}
        for address, cycles in trace:
            self.instructions += 1
            if address != after or not names:
                if previous is not None and not previous.branch and address != here:
                    self.gaps += 1  # (a repeated string instruction stays where it is)
                key = self._transfer(address, previous, after, names, returns)
            else:
                function = self._function(address)
                if function != names[-1]:  # fell through into the next function
                    names[-1] = function
                    key = (self.root, *names)
            if cycles is not None:
                cycles_seen = True
                weight = cycles
            else:
                weight = 1
            if self.inline:  # the stack's call sites and address, expanded at the end
                at = (key, tuple(returns), address)
                placed[at] = placed.get(at, 0) + weight
            else:
                stacks[key] = stacks.get(key, 0) + weight
            previous, here = self._insn(address), address
            after = address + previous.size if previous else -1
        folded.event = event or ("cycles" if cycles_seen else "instructions")
        if placed:
            self._expand(placed, stacks)
        if self.gaps:
            folded.notes.append(
                f"{self.gaps:,} jumps after instructions that do not branch: the trace has "
                "blocks, not instructions (QEMU needs -singlestep / -one-insn-per-tb)"
            )
        return folded

    def _expand(
        self, placed: dict[tuple[Stack, tuple[int, ...], int], int], stacks: dict[Stack, int]
    ) -> None:
        """Stacks with the inlined functions of each frame at its address (a caller's: its call
        instruction, just before the return address), from DWARF through addr2line -i."""
        pcs = {r - 1 for _, returns, _ in placed for r in returns} | {a for _, _, a in placed}
        inlined = self._inlined(pcs)
        for (key, returns, address), weight in placed.items():
            sites = [r - 1 for r in returns] + [address]
            frames = [self.root]
            for name, pc in zip(key[1:], sites, strict=True):
                frames += [name, *inlined.get(pc, ())]
            stack = tuple(frames)
            stacks[stack] = stacks.get(stack, 0) + weight

    def _inlined(self, pcs: set[int]) -> dict[int, list[str]]:
        """pc -> the functions inlined there, outermost first (one addr2line per binary)."""
        found: dict[int, list[str]] = {}
        for binary in self.binaries:
            mine = sorted(pc for pc in pcs if binary.covers(pc))
            if not mine:
                continue
            done = subprocess.run(
                ["addr2line", "-e", str(binary.path), "-i", "-f", "-a"],
                input="".join(f"{pc:#x}\n" for pc in mine),
                capture_output=True,
                text=True,
                errors="replace",
            )
            blocks = re.split(r"^0x([0-9a-f]+)\n", done.stdout, flags=re.M)[1:]
            for pc_text, block in zip(blocks[::2], blocks[1::2], strict=True):
                chain = pairs_to_frames(block, context=False).split(";")
                found[int(pc_text, 16)] = [f for f in chain[1:] if f != "??"]
        return found

    def _transfer(
        self,
        address: int,
        previous: _Insn | None,
        after: int,
        names: list[str],
        returns: list[int],
    ) -> Stack:
        """Update the stack for a jump to `address`; the new stack's key."""
        function = self._function(address)
        if names and previous is not None and previous.call:
            names.append(function)
            returns.append(after)
        elif address in returns:
            depth = len(returns) - 1 - returns[::-1].index(address)  # the innermost such
            del names[depth + 1 :], returns[depth:]
            if names[-1] != function:
                names[-1] = function
        elif names:
            names[-1] = function
        else:
            names.append(function)
        return (self.root, *names)


def load_trace(path: Path, binaries: list[Path], inline: bool = False) -> Folded:
    """The folded stacks of the trace file `path` (plain or .gz) of the program `binaries[0]`
    (its libraries after it), rooted at that program's name; with `inline`, inlined functions
    as frames of their own."""
    unwinder = Unwinder([Binary.load(b) for b in binaries], binaries[0].name, inline)
    report = TraceReport()
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", errors="surrogateescape") as lines:
            head = list(itertools.islice(lines, 50))
            kind = sniff(head)
            folded = unwinder.fold(steps(itertools.chain(head, lines), kind, report))
    except OSError as err:
        raise AutoprofError(f"cannot read --trace {path}: {err.strerror or err}") from None
    except AutoprofError as err:
        raise AutoprofError(f"{path}: {err}") from None
    if not folded.stacks:
        raise AutoprofError(f"{path}: no instructions in this {kind} trace")
    if report.skipped:
        folded.notes.append(
            f"{report.skipped:,} lines not understood, first: {report.first_skipped!r}"
        )
    return folded
