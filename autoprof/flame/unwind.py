"""Call stacks from an instruction trace: exact flame graphs, no sampling.

Every committed instruction is attributed to the stack it ran in. The stack is rebuilt from the
trace alone, with the binaries' symbols (pyelftools) and instructions (capstone). It changes
only where control leaves the straight line:

- a call instruction followed by a jump elsewhere pushes the target's function, remembering
  the return address (the call's address + its size);
- a return, or an indirect jump out of the function, to a pending return address pops back to
  that frame. Any other jump there is no return: at -O0 a recursive function's early exit
  jumps to its epilogue, which is the instruction after its own recursive call;
- a return or an indirect jump to the return address of a call whose caller is still on the
  stack, though the call returned already, unwinds to that caller: longjmp lands on the
  instruction after its setjmp (a stack pointer would tell; a trace of addresses has only the
  setjmp caller's frame, still live);
- after code outside the binaries (a library not given), a jump to a pending return address is
  taken as the return it most likely is;
- any other move into another function (a tail call, a fall-through, a jump to a .cold part)
  renames the top frame.

Most instructions follow the one before: a block of the trace is counted in bulk (numpy), and
Python looks only at the instructions where the stack may change (calls, returns, indirect
jumps, another function). Addresses outside the given binaries count under ``[unknown]``.
`Unwinder.check` says in one line what share of the trace lies in the binaries' text and
refuses a trace they do not describe (a position-independent binary loaded elsewhere, another
architecture's, another build of the program). Weights are the trace's cycles, or 1 per
instruction. With `inline`, each frame is split into the functions inlined at its address
(addr2line -i reads them from DWARF, once per distinct address at the end). `load_trace`
streams a trace file (plain or .gz) through it.
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

import numpy as np

from autoprof.errors import AutoprofError
from autoprof.flame.fold import Folded, Stack
from autoprof.flame.inline import pairs_to_frames
from autoprof.flame.trace import Block, TraceReport, blocks, read_blocks, sniff

__all__ = ["UNKNOWN", "Binary", "Unwinder", "load_trace"]

UNKNOWN = "[unknown]"
_MAX_INSN = 16  # the longest x86 instruction; RISC-V's are 2 or 4 bytes
_BRANCH_GROUPS = (1, 2, 3, 4, 5, 7)  # capstone's JUMP, CALL, RET, INT, IRET, BRANCH_RELATIVE
# What an instruction is, as bits: decoded at all, a call, a return, an indirect jump, any
# control transfer (branches, calls, returns, traps), inside a binary's executable segments.
DECODED, CALL, RET, JUMP, FLOW, INSIDE = 1, 2, 4, 8, 16, 32
MIN_INSIDE = 0.01  # a trace with less in the binaries' text is not theirs: refused
_GAP_SAMPLES = 200  # jumps after non-branches checked against the binaries' blocks
_BLOCK_WALK = 64  # instructions walked to find where a block ends


@dataclass(frozen=True)
class _Insn:
    size: int
    flags: int  # CALL | RET | JUMP | FLOW
    target: int | None = None  # a direct branch's destination


@dataclass
class Binary:
    """One ELF: its functions (sorted by address) and its code, decoded on demand."""

    path: Path
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    segments: list[tuple[int, bytes]] = field(default_factory=list)  # executable, by address
    arch: str = "x86-64"
    pie: bool = False  # position-independent (ET_DYN): it runs wherever it is loaded
    _sections: list[tuple[int, int]] = field(default_factory=list)  # executable, [start, end)

    @classmethod
    def load(cls, path: Path) -> Binary:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        try:
            with path.open("rb") as stream:
                elf = ELFFile(stream)
                binary = cls(path, arch=elf.get_machine_arch())
                binary.pie = elf.header["e_type"] == "ET_DYN"
                symbols = binary._read(elf)
        except OSError as err:
            raise AutoprofError(f"cannot read --binary {path}: {err.strerror}") from None
        except ELFError as err:
            raise AutoprofError(f"--binary {path} is not an ELF file: {err}") from None
        if not symbols:
            raise AutoprofError(f"--binary {path} has no function symbols (stripped?)")
        return binary

    def _read(self, elf: Any) -> int:  # pyelftools is untyped
        """Read the functions and code; the number of function symbols (0: stripped)."""
        from elftools.elf.sections import SymbolTableSection

        functions: dict[int, tuple[int, int, str]] = {}  # start -> (rank, size, name)
        for section in elf.iter_sections():
            if not isinstance(section, SymbolTableSection):
                continue
            for start, size, rank, name in _function_symbols(elf, section):
                # one name per address: a global one before a weak or local alias
                if start not in functions or rank < functions[start][0]:
                    functions[start] = (rank, size, name)
        symbols = len(functions)
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
        return symbols

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

    @property
    def text(self) -> str:
        """Where its executable segments lie, ``0x401000-0x49a3c5``."""
        low = min((base for base, _ in self.segments), default=0)
        high = max((base + len(code) for base, code in self.segments), default=0)
        return f"{low:#x}-{high:#x}"

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
                    if self.arch == "RISC-V":
                        return _Insn(insn.size, *_riscv_kind(insn))
                    return _Insn(insn.size, *_kind(insn))
        return None


_SYMBOL = {  # Elf32_Sym, Elf64_Sym
    32: [("name", "u4"), ("value", "u4"), ("size", "u4"), ("info", "u1"), ("o", "u1"), ("x", "u2")],
    64: [("name", "u4"), ("info", "u1"), ("o", "u1"), ("x", "u2"), ("value", "u8"), ("size", "u8")],
}
_STT_FUNC, _RANK = 2, {1: 0, 2: 1}  # STB_GLOBAL first, then STB_WEAK, then local


def _function_symbols(elf: Any, section: Any) -> list[tuple[int, int, int, str]]:
    """(address, size, rank, name) of a symbol table's functions: the table read as one
    array (Elf32_Sym / Elf64_Sym), not symbol by symbol (a static binary has thousands)."""
    dtype = np.dtype(_SYMBOL[elf.elfclass]).newbyteorder("<" if elf.little_endian else ">")
    table = np.frombuffer(section.data(), dtype=dtype)
    table = table[((table["info"] & 0xF) == _STT_FUNC) & (table["value"] != 0)]
    names = elf.get_section(section["sh_link"]).data()
    return [
        (
            int(value),
            int(size),
            _RANK.get(int(info) >> 4, 2),
            names[offset : names.index(b"\0", offset)].decode("utf-8", "replace"),
        )
        for offset, info, value, size in zip(
            table["name"], table["info"], table["value"], table["size"], strict=True
        )
    ]


def _kind(insn: Any) -> tuple[int, int | None]:
    """(CALL | RET | JUMP | FLOW bits, direct target) of an x86 or AArch64 instruction, by
    capstone's groups: an indirect jump is a jump whose operand is a register or memory."""
    import capstone  # no stubs: typed as Any by the mypy config

    if not any(insn.group(g) for g in _BRANCH_GROUPS):
        return 0, None
    flags = FLOW
    if insn.group(capstone.CS_GRP_CALL):
        flags |= CALL
    elif insn.group(capstone.CS_GRP_RET) or insn.group(capstone.CS_GRP_IRET):
        flags |= RET
    immediate = [op.imm for op in insn.operands if op.type == capstone.CS_OP_IMM]
    if insn.group(capstone.CS_GRP_JUMP) and not flags & RET and not immediate:
        flags |= JUMP
    return flags, immediate[-1] if immediate else None


_RISCV_LINK = ("ra", "t0", "x1", "x5")  # jal/jalr that link here are calls (t0: millicode)


def _riscv_kind(insn: Any) -> tuple[int, int | None]:
    """The same for RISC-V, by mnemonic (capstone puts every jal, ``j`` too, in its CALL
    group): jal/jalr linking ra are calls, jr/c.jr ra and ret returns, other jr indirect
    jumps; a direct target is the instruction's address plus its offset."""
    import capstone  # no stubs: typed as Any by the mypy config

    name = insn.mnemonic
    regs = re.findall(r"\b[a-z][a-z0-9]*", insn.op_str)  # registers: zero, ra, a5, t0
    offset = next((op.imm for op in insn.operands if op.type == capstone.CS_OP_IMM), None)
    target = insn.address + offset if offset is not None else None
    if name in ("c.jal", "c.jalr"):
        return FLOW | CALL, target
    if name in ("jal", "jalr"):  # one operand: the pseudo-instruction linking ra
        link = regs[0] if len(regs) > (0 if name == "jal" else 1) else "ra"
        if link in _RISCV_LINK:
            return FLOW | CALL, target
        if name == "jal":
            return FLOW, target
        return FLOW | (RET if regs[-1] == "ra" else JUMP), None
    if name == "ret" or (name in ("jr", "c.jr") and regs[:1] == ["ra"]):
        return FLOW | RET, None
    if name in ("jr", "c.jr"):
        return FLOW | JUMP, None
    if any(insn.group(g) for g in _BRANCH_GROUPS):
        return FLOW, target
    return 0, None


class Unwinder:
    """Folds a trace's blocks into stacks rooted at `root` (the program's name)."""

    def __init__(self, binaries: Iterable[Binary], root: str, inline: bool = False) -> None:
        self.binaries = list(binaries)
        self.root = root
        self.inline = inline
        # every distinct address: (size, flags, function id, row); its instruction, for walks
        self._rows: dict[int, tuple[int, int, int, int]] = {}
        self._insns: dict[int, _Insn | None] = {}
        self._addresses: list[int] = []  # row -> address
        self._functions: dict[str, int] = {UNKNOWN: 0}
        self._function_names = [UNKNOWN]
        self._returns_seen: set[int] = set()  # where the calls decoded so far return
        self._return_array = np.zeros(0, dtype=np.uint64)
        # the stack: frames, root first; returns[i] is where the call that made names[i + 1]
        # returns; each frame's id, and each call site's caller (depth, id) for longjmp
        self._names: list[str] = []
        self._returns: list[int] = []
        self._frames: list[int] = []
        self._landing: dict[int, tuple[int, int]] = {}
        self._key: Stack = (root,)
        # the last instruction of the previous block: address, after it, flags, function
        self._last = (0, 0, 0, -1)
        # what the trace held
        self.instructions = 0
        self.inside = 0  # instructions in the binaries' executable segments
        self.steps_inside = 0  # steps from one such instruction to the next
        self.unexplained = 0  # ... that no instruction there leads to
        self.gaps = 0  # sequential instructions that skipped ahead: a trace of blocks
        self.transitions = 0  # where Python looked at the stack
        self._outside: tuple[int, int] | None = None  # the lowest and highest address outside
        self._gap_pairs: list[tuple[int, int]] = []

    def _binary(self, address: int) -> Binary | None:
        return next((b for b in self.binaries if b.covers(address)), None)

    def _row(self, address: int) -> tuple[int, int, int, int]:
        row = self._rows.get(address)
        if row is None:
            binary = self._binary(address)
            insn = binary.decode(address) if binary else None
            name = (binary.function(address) if binary else None) or UNKNOWN
            function = self._functions.setdefault(name, len(self._function_names))
            if function == len(self._function_names):
                self._function_names.append(name)
            flags = (INSIDE if binary else 0) | (DECODED | insn.flags if insn else 0)
            if insn and insn.flags & CALL:
                self._returns_seen.add(address + insn.size)
            row = self._rows[address] = (insn.size if insn else 0, flags, function, len(self._rows))
            self._insns[address] = insn
            self._addresses.append(address)
        return row

    def fold(self, trace: Iterable[Block], event: str | None = None) -> Folded:
        """The stacks of `trace`, weighted by cycles (or instructions when it has none)."""
        folded = Folded()
        placed: dict[tuple[Stack, tuple[int, ...], int], int] = {}
        cycles_seen = False
        for addresses, cycles in trace:
            if len(addresses):
                cycles_seen |= self._fold_block(addresses, cycles, folded.stacks, placed)
        folded.event = event or ("cycles" if cycles_seen else "instructions")
        if placed:
            self._expand(placed, folded.stacks)
        return folded

    def _fold_block(
        self,
        addresses: np.ndarray,
        cycles: np.ndarray | None,
        stacks: dict[Stack, int],
        placed: dict[tuple[Stack, tuple[int, ...], int], int],
    ) -> bool:
        """Fold one block; whether it had cycles."""
        unique, where = np.unique(addresses, return_inverse=True)
        known = len(self._returns_seen)
        table = np.array([self._row(a) for a in unique.tolist()], dtype=np.int64).reshape(-1, 4)
        if len(self._returns_seen) != known:
            self._return_array = np.array(sorted(self._returns_seen), dtype=np.uint64)
        size, flags, function = table[where, 0], table[where, 1], table[where, 2]
        after = np.where(flags & DECODED, addresses + size.astype(np.uint64), np.uint64(0))
        last_address, last_after, last_flags, last_function = self._last
        before = np.empty_like(addresses)  # each instruction's predecessor
        before[0], before[1:] = last_address, addresses[:-1]
        prev_after = np.empty_like(after)
        prev_after[0], prev_after[1:] = last_after, after[:-1]
        prev_flags = np.empty_like(flags)
        prev_flags[0], prev_flags[1:] = last_flags, flags[:-1]
        prev_function = np.empty_like(function)
        prev_function[0], prev_function[1:] = last_function, function[:-1]
        self._last = (int(addresses[-1]), int(after[-1]), int(flags[-1]), int(function[-1]))

        sequential = addresses == prev_after
        # where the stack may change: a call, return or indirect jump taken, another function,
        # or, after code outside the binaries, a jump to where some call returns
        transfer = (prev_flags & (CALL | RET | JUMP)) != 0
        outside = np.flatnonzero(~sequential & ((prev_flags & DECODED) == 0))
        if len(outside) and len(self._return_array):
            transfer[outside] |= np.isin(addresses[outside], self._return_array)
        change = (~sequential & transfer) | (function != prev_function)
        if not self._names:
            change[0] = True
        self._count(addresses, before, flags, prev_flags, sequential)

        starts = np.flatnonzero(change)
        opens = len(starts) > 0 and starts[0] == 0  # the block's first instruction changes it
        bounds = starts if opens else np.concatenate(([0], starts))
        lengths = np.diff(np.append(bounds, len(addresses)))
        weights = np.ones(len(addresses), dtype=np.int64)
        if cycles is not None:
            weights = np.where(cycles >= 0, cycles, 1)
        sums = np.add.reduceat(weights, bounds) if cycles is not None else lengths
        changes = zip(
            addresses[starts].tolist(),
            function[starts].tolist(),
            prev_flags[starts].tolist(),
            prev_after[starts].tolist(),
            sequential[starts].tolist(),
            strict=True,
        )
        states: list[tuple[Stack, tuple[int, ...]]] = []
        key = self._key
        for i, weight in enumerate(sums.tolist()):
            if i or opens:
                key = self._transition(*next(changes))
            if self.inline:
                states.append((key, tuple(self._returns)))
            else:
                stacks[key] = stacks.get(key, 0) + weight
        self._key = key
        if self.inline:
            self._place(states, lengths, table[where, 3], weights, placed)
        return cycles is not None and bool((cycles >= 0).any())

    def _count(
        self,
        addresses: np.ndarray,
        before: np.ndarray,
        flags: np.ndarray,
        prev_flags: np.ndarray,
        sequential: np.ndarray,
    ) -> None:
        """What the block says of the binaries: instructions inside their text, steps there
        that their code explains (the next instruction, after a branch, a repeated string
        instruction), jumps after instructions that do not branch (and the first few)."""
        inside = (flags & INSIDE) != 0
        self.instructions += len(addresses)
        self.inside += int(inside.sum())
        if not inside.all():
            out = addresses[~inside]
            low, high = int(out.min()), int(out.max())
            if self._outside:
                low, high = min(low, self._outside[0]), max(high, self._outside[1])
            self._outside = (low, high)
        pairs = inside & ((prev_flags & INSIDE) != 0)
        repeated = addresses == before
        explained = sequential | ((prev_flags & FLOW) != 0) | repeated
        self.steps_inside += int(pairs.sum())
        self.unexplained += int((pairs & ~explained).sum())
        gap = ((prev_flags & (DECODED | FLOW)) == DECODED) & ~sequential & ~repeated
        self.gaps += int(gap.sum())
        room = _GAP_SAMPLES - len(self._gap_pairs)
        if room > 0:
            at = np.flatnonzero(gap)[:room]
            self._gap_pairs += zip(before[at].tolist(), addresses[at].tolist(), strict=True)

    def _transition(
        self, address: int, function: int, prev_flags: int, prev_after: int, sequential: bool
    ) -> Stack:
        """Update the stack for the instruction at `address` after one with `prev_flags`;
        the new stack's key."""
        self.transitions += 1
        name = self._function_names[function]
        names = self._names
        if not names:
            names.append(name)
            self._frames.append(self.transitions)
        elif sequential:
            pass  # fell through into the next function: renamed below
        elif prev_flags & CALL:
            self._landing[prev_after] = (len(names) - 1, self._frames[-1])
            names.append(name)
            self._returns.append(prev_after)
            self._frames.append(self.transitions)
        elif (
            prev_flags & RET
            or (prev_flags & JUMP and name != names[-1])
            or not prev_flags & DECODED
        ):
            self._unwind(address)
        if names[-1] != name:
            names[-1] = name
        return (self.root, *names)

    def _unwind(self, address: int) -> None:
        """Pop back to the frame a return to `address` goes to: the innermost call pending
        there, else the live caller of a call that returned there before (longjmp)."""
        returns = self._returns
        if address in returns:
            depth = len(returns) - 1 - returns[::-1].index(address)
        else:
            depth, frame = self._landing.get(address, (len(self._names), -1))
            if depth >= len(self._names) or self._frames[depth] != frame:
                return
        del self._names[depth + 1 :], self._frames[depth + 1 :], returns[depth:]

    def _place(
        self,
        states: list[tuple[Stack, tuple[int, ...]]],
        lengths: np.ndarray,
        rows: np.ndarray,
        weights: np.ndarray,
        placed: dict[tuple[Stack, tuple[int, ...], int], int],
    ) -> None:
        """Weights by (stack, call sites, address), for `_expand`."""
        ids: dict[tuple[Stack, tuple[int, ...]], int] = {}
        state = np.repeat(np.array([ids.setdefault(s, len(ids)) for s in states]), lengths)
        keys, where = np.unique(state << 32 | rows, return_inverse=True)
        sums = np.zeros(len(keys), dtype=np.int64)
        np.add.at(sums, where, weights)
        by_id = list(ids)
        for key, weight in zip(keys.tolist(), sums.tolist(), strict=True):
            stack, returns = by_id[key >> 32]
            at = (stack, returns, self._addresses[key & 0xFFFFFFFF])
            placed[at] = placed.get(at, 0) + weight

    def check(self) -> list[str]:
        """One-line notes on how well the binaries describe the trace; AutoprofError when they
        do not (almost nothing inside their text, or code that does not lead where the trace
        goes)."""
        names = ", ".join(b.path.name for b in self.binaries)
        texts = ", ".join(b.text for b in self.binaries)
        share = self.inside / self.instructions if self.instructions else 0.0
        outside = self.instructions - self.inside
        ran = f"{self._outside[0]:#x}-{self._outside[1]:#x}" if self._outside else ""
        if share < MIN_INSIDE:
            pie = [b.path.name for b in self.binaries if b.pie]
            why = (
                f"{', '.join(pie)} is position-independent and ran loaded elsewhere: build it "
                "with -no-pie, or give a binary at the addresses that ran"
                if pie
                else "another program, or another architecture's build? (give the binary the "
                "trace ran, and its shared libraries)"
            )
            raise AutoprofError(
                f"only {share:.1%} of the trace's {self.instructions:,} instructions fall "
                f"inside the text of {names} ({texts}); the trace ran at {ran}: {why}"
            )
        notes = []
        if outside:
            notes.append(
                f"{share:.1%} of the {self.instructions:,} instructions fall inside the text of "
                f"{names}; the other {outside:,} ran at {ran} (code not given with --binary) "
                f"and count under {UNKNOWN}"
            )
        unexplained = self.unexplained / self.steps_inside if self.steps_inside else 0.0
        if self.gaps or unexplained > 0.05:
            ends = [self._block_ends(a, b) for a, b in self._gap_pairs]
            judged = [e for e in ends if e is not None]
            block_ends = sum(judged) / len(judged) if judged else 0.0
            if block_ends >= 0.5:
                notes.append(
                    f"{self.gaps:,} jumps after instructions that do not branch: the trace has "
                    "blocks, not instructions (QEMU needs -singlestep / -one-insn-per-tb)"
                )
            elif unexplained > 0.05:
                raise AutoprofError(
                    f"the code of {names} does not lead where the trace goes: {unexplained:.0%} "
                    "of the steps inside its text follow no instruction there (not the next "
                    "one, not a branch), and they are no ends of blocks either: another build "
                    "of the program? (give the binary the trace ran)"
                )
            else:
                notes.append(
                    f"{self.gaps:,} jumps after instructions that do not branch (a signal "
                    "handler, or code written at run time)"
                )
        return notes

    def _block_ends(self, start: int, to: int) -> bool | None:
        """Whether the straight line of code from `start` reaches `to`, or ends in a branch
        that may go there (a trace of blocks jumps from a block's first instruction to the
        next block's); None when an indirect branch ends it."""
        address = start
        for _ in range(_BLOCK_WALK):
            self._row(address)
            insn = self._insns[address]
            if insn is None:
                return False
            after = address + insn.size
            if insn.flags & FLOW:
                if insn.flags & (RET | JUMP) or (insn.flags & CALL and insn.target is None):
                    return None
                return to in (after, insn.target)
            if after == to:
                return True
            address = after
        return False

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


def load_trace(path: Path, binaries: list[Path], inline: bool = False) -> Folded:
    """The folded stacks of the trace file `path` (plain or .gz) of the program `binaries[0]`
    (its libraries after it), rooted at that program's name; with `inline`, inlined functions
    as frames of their own."""
    unwinder = Unwinder([Binary.load(b) for b in binaries], binaries[0].name, inline)
    report = TraceReport()
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as stream:
            chunks = read_blocks(stream)
            first = next(chunks, b"")
            head = first.split(b"\n", 50)[:50]
            kind = sniff(line.decode("utf-8", "surrogateescape") + "\n" for line in head)
            folded = unwinder.fold(blocks(itertools.chain([first], chunks), kind, report))
        if not folded.stacks:
            raise AutoprofError(f"no instructions in this {kind} trace")
        folded.notes += unwinder.check()
    except OSError as err:
        raise AutoprofError(f"cannot read --trace {path}: {err.strerror or err}") from None
    except AutoprofError as err:
        raise AutoprofError(f"{path}: {err}") from None
    if report.skipped:
        folded.notes.append(
            f"{report.skipped:,} lines not understood, first: {report.first_skipped!r}"
        )
    return folded
