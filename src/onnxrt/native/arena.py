"""The run arena: numpy's data allocator inside large runs, large blocks kept for reuse instead of returned to the OS."""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from . import memory
from .team import _cas, _pause, _store

# Why an arena
# ------------
# A large run allocates its values' arrays and frees them a few steps later. glibc serves
# blocks from 128 KiB on (its mmap threshold, which grows with what was freed up to 32 MiB)
# by fresh mappings or from the top of its heap, and gives them back to the kernel when they
# are freed (munmap, or trimming the heap's top): the next run's arrays fault their pages in
# again, a fault (and a zeroed page) per 4 KiB. bert-base took ~8,800 faults a run (130 ->
# 146 ms), efficientnet_b0 1,650 (15 -> 18 ms), convnext_tiny 4,400 (62 -> 68 ms).
# glibc's mallopt would keep that memory for the whole process (ONNXRT_MALLOPT=1, an
# opt-in: onnxrt does not change its host's allocator). This arena is numpy's allocator
# (NEP 49: PyDataMem_SetHandler, a context variable) only inside the runs of large
# models (parallel.RunScope with ``eager``): blocks of LARGE bytes and more freed during a
# run stay in size classes (8 per octave) and serve the next allocations of their class or
# of the classes up to an octave below; everything else goes to the C library. Blocks freed
# outside runs (a caller dropping an output) go back to the C library, and the arena holds
# at most CAP bytes: ``release()`` frees them all.
#
# The four functions are compiled C callables (numba cfunc), called by numpy with the GIL
# held; a spin lock (one word, compare-and-swap) still guards the classes. Every block has
# a 64-byte-aligned start and a two-word header just before it: its class (-1: a block of
# the C library, freed there) and the address the C library returned. numpy passes free
# the size it asked for, realloc does not: the header is what makes both exact.

#: bytes from which a block is kept by the arena (below: the C library's own free lists serve it well)
LARGE = 1 << 18
#: size classes per octave
PER_OCTAVE = 8
#: classes (LARGE to about 2**41 bytes)
CLASSES = 8 * 23
#: blocks kept per class at most
SLOTS = 16
#: bytes the arena keeps at most (``ONNXRT_ARENA_MB``; 0 disables it)
CAP = int(float(os.environ.get("ONNXRT_ARENA_MB", "1024") or 0) * (1 << 20))

_LOG_LARGE = LARGE.bit_length() - 1
_ALIGN = 64
_HEADER = 16
# words of the state block: the lock, the C library's functions, accounting, then per class
# a count and SLOTS addresses
_LOCK, _MALLOC, _CALLOC, _REALLOC, _FREE, _MEMSET, _MEMCPY, _CACHED, _CAP, _IN_RUN, _HITS, _MISSES = range(12)
_COUNTS = 16
_SLOTS_AT = _COUNTS + CLASSES
_WORDS = _SLOTS_AT + CLASSES * SLOTS

_I64 = ir.IntType(64)


@intrinsic
def _c1(typingctx, fn, a):
    """The C function at ``fn`` called with one int64 argument: its int64 result."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [_I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]])

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def _c2(typingctx, fn, a, b):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [_I64, _I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1], args[2]])

    return types.int64(types.int64, types.int64, types.int64), codegen


@intrinsic
def _c3(typingctx, fn, a, b, c):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [_I64, _I64, _I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1], args[2], args[3]])

    return types.int64(types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _words_at(typingctx, address):
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.int64).as_pointer())

    return types.CPointer(types.int64)(types.int64), codegen


_OPTS = {"nogil": True, "cache": True, "inline": "always"}


@njit(**_OPTS)
def _class_of(size):
    # the smallest class whose blocks hold ``size`` (> LARGE) bytes: with n = size - 1 and b its
    # top bit, class sizes (9..16) << (b - 3) step by an eighth of an octave
    n = size - 1
    b = 0
    while (n >> (b + 1)) != 0:
        b += 1
    top = n >> (b - 3)  # 8..15
    return (b - _LOG_LARGE) * PER_OCTAVE + (top - 8)


@njit(**_OPTS)
def _class_size(k):
    b = k // PER_OCTAVE + _LOG_LARGE
    return (k % PER_OCTAVE + 9) << (b - 3)


@njit(**_OPTS)
def _lock(s):
    while not _cas(s, _LOCK, 0, 1):
        _pause()


@njit(**_OPTS)
def _header(user):
    return carray(_words_at(user - _HEADER), 2)


@njit(**_OPTS)
def _small(s, size, zero):
    # a block of the C library with the header in front (16 bytes keep malloc's alignment)
    raw = _c2(s[_CALLOC], 1, size + _HEADER) if zero else _c1(s[_MALLOC], size + _HEADER)
    if raw == 0:
        return 0
    user = raw + _HEADER
    h = _header(user)
    h[0] = -1
    h[1] = raw
    return user


@njit(**_OPTS)
def _large(s, size, zero):
    k = _class_of(size)
    if k >= CLASSES:
        return _small(s, size, zero)
    found = 0
    _lock(s)
    # its own class, else a kept block of up to an octave larger (a free block of a near size
    # serves before the C library maps a new one)
    for c in range(k, min(k + PER_OCTAVE, CLASSES)):
        n = s[_COUNTS + c]
        if n > 0:
            s[_COUNTS + c] = n - 1
            found = s[_SLOTS_AT + c * SLOTS + n - 1]
            s[_CACHED] -= _class_size(c)
            break
    if found:
        s[_HITS] += 1
    else:
        s[_MISSES] += 1
    _store(s, _LOCK, 0)
    if found:
        if zero:
            _c3(s[_MEMSET], found, 0, size)
        return found
    cs = _class_size(k)
    raw = _c1(s[_MALLOC], cs + _ALIGN + _HEADER)
    if raw == 0:
        return 0
    user = (raw + _HEADER + _ALIGN - 1) & ~(_ALIGN - 1)
    if zero:
        _c3(s[_MEMSET], user, 0, size)
    h = _header(user)
    h[0] = k
    h[1] = raw
    return user


@njit(**_OPTS)
def _state(ctx):
    return carray(_words_at(ctx), _WORDS)


@njit(**_OPTS)
def _alloc(ctx, size, zero):
    s = _state(ctx)
    if size >= LARGE:
        return _large(s, size, zero)
    return _small(s, size, zero)


@njit(**_OPTS)
def _release(s, user):
    h = _header(user)
    k = h[0]
    if k >= 0 and s[_IN_RUN] > 0:
        cs = _class_size(k)
        _lock(s)
        n = s[_COUNTS + k]
        kept = n < SLOTS and s[_CACHED] + cs <= s[_CAP]
        if kept:
            s[_SLOTS_AT + k * SLOTS + n] = user
            s[_COUNTS + k] = n + 1
            s[_CACHED] += cs
        _store(s, _LOCK, 0)
        if kept:
            return
    _c1(s[_FREE], h[1])


@cfunc(types.int64(types.int64, types.int64), cache=True, nopython=True)
def arena_malloc(ctx, size):
    return _alloc(ctx, size, False)


@cfunc(types.int64(types.int64, types.int64, types.int64), cache=True, nopython=True)
def arena_calloc(ctx, nelem, elsize):
    return _alloc(ctx, nelem * elsize, True)


@cfunc(types.int64(types.int64, types.int64, types.int64), cache=True, nopython=True)
def arena_realloc(ctx, user, size):
    s = _state(ctx)
    if user == 0:
        return _alloc(ctx, size, False)
    h = _header(user)
    k = h[0]
    if k < 0:
        raw = _c2(s[_REALLOC], h[1], size + _HEADER)  # the header moves with the data
        if raw == 0:
            return 0
        user = raw + _HEADER
        _header(user)[1] = raw
        return user
    cs = _class_size(k)
    if size <= cs:
        return user
    moved = _alloc(ctx, size, False)
    if moved == 0:
        return 0
    _c3(s[_MEMCPY], moved, user, cs)
    _release(s, user)
    return moved


@cfunc(types.void(types.int64, types.int64, types.int64), cache=True, nopython=True)
def arena_free(ctx, user, size):
    if user != 0:
        _release(_state(ctx), user)


@njit(cache=True, nogil=True)
def _drain(ctx):
    # every kept block back to the C library; the bytes freed
    s = _state(ctx)
    _lock(s)
    freed = s[_CACHED]
    for k in range(CLASSES):
        for i in range(s[_COUNTS + k]):
            _c1(s[_FREE], _header(s[_SLOTS_AT + k * SLOTS + i])[1])
        s[_COUNTS + k] = 0
    s[_CACHED] = 0
    _store(s, _LOCK, 0)
    return freed


NAME = "onnxrt_arena"
_RUNS_LOCK = threading.Lock()


def _build() -> tuple | None:
    # the state block and the handler live in permanent memory (memory.permanent): arrays the
    # arena allocated may be freed through them until the process ends
    libc = memory.libc_functions()
    set_handler = memory.numpy_set_handler()
    if libc is None or set_handler is None:
        return None
    address = memory.permanent(_WORDS * 8)
    state = memory.array_at(address, np.dtype(np.int64), _WORDS)
    state[_MALLOC], state[_CALLOC], state[_REALLOC], state[_FREE], state[_MEMSET], state[_MEMCPY] = libc
    state[_CAP] = CAP
    handler = memory.numpy_handler(NAME, address, arena_malloc.address, arena_calloc.address, arena_realloc.address,
                                   arena_free.address)
    return state, handler, set_handler


_BUILT = _build() if CAP > 0 else None
_STATE = _BUILT[0] if _BUILT is not None else np.zeros(_WORDS, np.int64)


class Scope:
    """numpy's allocations of this thread's context go to the arena inside the block, and
    blocks freed by anyone meanwhile are kept (the run scope of a large run enters it).
    ``owner`` (a session) is remembered: when the last owner that ran in the arena is
    collected, the kept blocks go back to the C library."""

    __slots__ = ("previous",)

    def __init__(self, owner: object = None) -> None:
        self.previous = None
        if owner is not None and owner not in _OWNERS:
            try:
                _OWNERS.add(owner)
            except TypeError:  # not weakly referenceable: nothing to follow
                return
            weakref.finalize(owner, _owner_gone).atexit = False  # (the process's end frees everything)

    def __enter__(self) -> None:
        with _RUNS_LOCK:
            _STATE[_IN_RUN] += 1
        self.previous = _BUILT[2](_BUILT[1])  # type: ignore[index]

    def __exit__(self, *exc: object) -> None:
        _BUILT[2](self.previous)  # type: ignore[index]
        self.previous = None
        with _RUNS_LOCK:
            _STATE[_IN_RUN] -= 1


_OWNERS: weakref.WeakSet = weakref.WeakSet()


def _owner_gone() -> None:
    # (a finalizer: the owner is already out of the set, or about to be)
    if not any(True for _ in _OWNERS) and not _STATE[_IN_RUN]:
        release()


def available() -> bool:
    """Whether the arena is in place (glibc-style C library, numpy's handler API, CAP > 0)."""
    return _BUILT is not None


def release() -> int:
    """Give every block the arena keeps back to the C library; the bytes it kept."""
    return int(_drain(_STATE.ctypes.data)) if _BUILT is not None else 0


def stats() -> dict[str, int]:
    """Bytes kept, kept blocks reused, and large allocations the C library served."""
    return {"cached": int(_STATE[_CACHED]), "hits": int(_STATE[_HITS]), "misses": int(_STATE[_MISSES]),
            "cap": int(_STATE[_CAP])}


if _BUILT is not None:
    from .. import parallel

    parallel.register_native_hooks(arena=Scope)
