"""A team of worker threads that run compiled kernels' parts without the GIL: spin, then sleep on a futex."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .. import parallel


# Why a team
# ----------
# The kernel pool (onnxrt.parallel) runs Python callables on Python threads: a worker
# woken for a loop first wakes from its queue, then waits for the GIL, and the caller
# waits for it on a condition variable, each wake-up 40-90 us on the virtual machines
# measured (a halted vCPU). For a 1M-element Sigmoid (500 us on one thread) that left
# a second thread 1.1-1.2x. The team's workers never need the GIL: each runs one compiled
# loop forever, spinning (pause) for SPIN_US on a sequence number after its last job,
# then sleeping on a futex. The caller posts a job (a compiled part function's address,
# the address of its arguments, a part count), wakes sleepers with one futex call, takes
# parts itself, and spins until every part is done. Parts are claimed by a
# compare-and-swap on one word holding (sequence << 32 | next part): a worker late for
# a job can never claim a part of the next one. Linux on x86-64 only (futex, pause);
# elsewhere callers keep the pool.

#: microseconds a worker spins after its last job before it sleeps (a model's next kernel
#: finds it awake; a longer spin would take the core from BLAS's threads)
SPIN_US = 50.0

# Hot runs
# --------
# A worker woken by a futex joins its job 50 us late on these virtual machines, and a
# model's team kernels are often further apart than SPIN_US (shufflenet: a grouped
# convolution, a reshape and a transpose, then a depthwise one). While a large model
# runs (onnxrt.parallel.RunScope, eager runs), the workers are kept "hot": they neither
# sleep nor pause-spin but yield the core (sched_yield) between looks at the job word, so
# a BLAS or pool thread woken on their core runs at once, and a job finds them within a
# microsecond. The run's end drops them back to SPIN_US and sleep. shufflenet with its
# grouped and depthwise convolutions on the team: 10.1 -> 8.5 ms with the workers awake.
# Other threads cannot count on sched_yield to get the core (a yielding thread is picked
# again as often as not): while the run's pool loops and threaded BLAS products run, the
# workers are "cold" (HOT < 0: they sleep at once) and woken again after (zfnet512, whose
# convolutions are pool loops and whose dense layers threaded products: 44 -> 115 ms with
# hot workers competing, back to 44 cold).

_I64 = ir.IntType(64)

# word offsets in the control array: the words the caller and workers write sit on
# separate cache lines
_SEQ, _NEXT, _DONE, _SLEEP, _FN, _ARGS, _PARTS, _HOT = 0, 8, 16, 24, 32, 33, 34, 40
# _LIMIT: how many workers may join the job (the caller's session cap less the caller);
# _JOINED: how many have tried (a worker over the limit leaves the job to the others)
_LIMIT, _JOINED = 35, 48
_CTL_WORDS = 56
_SYS_FUTEX, _FUTEX_WAIT, _FUTEX_WAKE = 202, 128, 129  # x86-64 Linux; the PRIVATE variants
_SYS_SCHED_YIELD = 24
#: pauses (~20 ns each) a caller spins waiting for a worker's parts before it yields its core
_WAIT_SPINS = 256


def _word(context, builder, signature, args):
    # the address of ctl[index] (an int64 array and an index)
    data = context.make_array(signature.args[0])(context, builder, args[0]).data
    return builder.gep(data, [args[1]])


@intrinsic
def _load(typingctx, ctl, index):
    """ctl[index] as a sequentially consistent atomic load."""

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_word(context, builder, signature, args), "seq_cst", 8)

    return types.int64(ctl, types.int64), codegen


@intrinsic
def _store(typingctx, ctl, index, value):
    """ctl[index] = value as a sequentially consistent atomic store."""

    def codegen(context, builder, signature, args):
        builder.store_atomic(args[2], _word(context, builder, signature, args), "seq_cst", 8)
        return context.get_dummy_value()

    return types.none(ctl, types.int64, types.int64), codegen


@intrinsic
def _cas(typingctx, ctl, index, expected, new):
    """Atomically ctl[index] = new if it is ``expected``; whether it was."""

    def codegen(context, builder, signature, args):
        res = builder.cmpxchg(_word(context, builder, signature, args), args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(res, 1)

    return types.boolean(ctl, types.int64, types.int64, types.int64), codegen


@intrinsic
def _add(typingctx, ctl, index, value):
    """Atomically ctl[index] += value."""

    def codegen(context, builder, signature, args):
        builder.atomic_rmw("add", _word(context, builder, signature, args), args[2], "seq_cst")
        return context.get_dummy_value()

    return types.none(ctl, types.int64, types.int64), codegen


@intrinsic
def _fetch_add(typingctx, ctl, index, value):
    """Atomically ctl[index] += value; the value before."""

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _word(context, builder, signature, args), args[2], "seq_cst")

    return types.int64(ctl, types.int64, types.int64), codegen


@intrinsic
def _address(typingctx, ctl, index):
    """The address of ctl[index] (the futex word)."""

    def codegen(context, builder, signature, args):
        return builder.ptrtoint(_word(context, builder, signature, args), _I64)

    return types.int64(ctl, types.int64), codegen


@intrinsic
def _pause(typingctx):
    """x86's pause: a spinning core yields to its sibling and saves power."""

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=ir.FunctionType(ir.VoidType(), []))
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def _cycles(typingctx):
    """The time-stamp counter (rdtsc)."""

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.readcyclecounter", fnty=ir.FunctionType(_I64, []))
        return builder.call(fn, [])

    return types.int64(), codegen


@intrinsic
def _call_part(typingctx, fn, args, part):
    """fn(args, part) for the address of a compiled part function ``void(int64, int64)``."""

    def codegen(context, builder, signature, a):
        fnty = ir.FunctionType(ir.VoidType(), [_I64, _I64])
        builder.call(builder.inttoptr(a[0], fnty.as_pointer()), [a[1], a[2]])
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, types.int64), codegen


@intrinsic
def _futex(typingctx, syscall, word, op, value):
    """libc's syscall(SYS_futex, word, op, value, NULL) (``syscall`` is its address)."""

    def codegen(context, builder, signature, a):
        fnty = ir.FunctionType(_I64, [_I64], var_arg=True)
        fn = builder.inttoptr(a[0], fnty.as_pointer())
        return builder.call(fn, [ir.Constant(_I64, _SYS_FUTEX), a[1], a[2], a[3], ir.Constant(_I64, 0)])

    return types.int64(types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _sched_yield(typingctx, syscall):
    """libc's syscall(SYS_sched_yield): another thread runnable on this core runs first."""

    def codegen(context, builder, signature, a):
        fnty = ir.FunctionType(_I64, [_I64], var_arg=True)
        return builder.call(builder.inttoptr(a[0], fnty.as_pointer()), [ir.Constant(_I64, _SYS_SCHED_YIELD)])

    return types.int64(types.int64), codegen


@njit(nogil=True, inline="always")
def _take_parts(ctl, seq):
    # run parts of job ``seq`` until none is left (or the job is not ``seq`` any more)
    fn, args, parts = ctl[_FN], ctl[_ARGS], ctl[_PARTS]
    while True:
        word = _load(ctl, _NEXT)
        part = word & 0xFFFFFFFF
        if (word >> 32) != seq or part >= parts:
            return
        if _cas(ctl, _NEXT, word, word + 1):
            _call_part(fn, args, part)
            _add(ctl, _DONE, 1)


@njit(nogil=True, inline="always")
def _wake(ctl, syscall):
    # a worker sets SLEEP before its last look at SEQ (and HOT): this load sees it, or the
    # worker sees the new SEQ (HOT)
    if _load(ctl, _SLEEP) == 1 and _cas(ctl, _SLEEP, 1, 0):
        _futex(syscall, _address(ctl, _SLEEP), _FUTEX_WAKE, 1 << 30)


@njit(nogil=True, cache=True)
def team_heat(ctl, delta, syscall):
    """HOT += delta (a run starts: +1, ends: -1; a pool loop or a threaded product inside
    it: -COLD, then +COLD); a rise wakes sleeping workers."""
    _add(ctl, _HOT, delta)
    if delta > 0:
        _wake(ctl, syscall)


@njit(nogil=True, cache=True)
def team_run(ctl, fn, args, parts, workers, syscall):
    """Post a job that at most ``workers`` workers join, wake sleeping workers, take parts,
    and wait until all are done."""
    seq = (ctl[_SEQ] + 1) & 0x7FFFFFFF
    ctl[_FN] = fn
    ctl[_ARGS] = args
    ctl[_PARTS] = parts
    ctl[_LIMIT] = workers
    _store(ctl, _JOINED, 0)
    _store(ctl, _DONE, 0)
    _store(ctl, _NEXT, seq << 32)
    _store(ctl, _SEQ, seq)
    _wake(ctl, syscall)
    _take_parts(ctl, seq)
    # a worker that claimed the last parts may share this core (the scheduler moved it
    # while BLAS's threads ran): after a short spin, yield so that it can finish them
    spins = 0
    while _load(ctl, _DONE) < parts:
        if spins < _WAIT_SPINS:
            _pause()
            spins += 1
        else:
            _sched_yield(syscall)


@njit(nogil=True, cache=True)
def team_run_kept(ctl, fn, block, s0, a0, s1, a1, s2, a2, parts, workers, syscall):
    """team_run for a kept argument block: the data addresses of a0, a1, a2 go into its
    slots s0, s1, s2 first (-1: no array). One compiled call where the Python side paid
    a call and an item assignment per array and one for the run (about 12 us a job once
    the interpreter's caches are cold behind a large kernel)."""
    if s0 >= 0:
        block[s0] = a0.ctypes.data
    if s1 >= 0:
        block[s1] = a1.ctypes.data
    if s2 >= 0:
        block[s2] = a2.ctypes.data
    team_run(ctl, fn, block.ctypes.data, parts, workers, syscall)


@njit(nogil=True, cache=True)
def team_worker(ctl, spin_cycles, syscall):
    """A worker's whole life: take parts of each new job, spin ``spin_cycles`` after it,
    then sleep on the futex until the next job wakes it."""
    last = _load(ctl, _SEQ)
    since = _cycles()
    while True:
        seq = _load(ctl, _SEQ)
        if seq != last:
            last = seq
            # no more workers than the caller's session allows (its intra_op_num_threads)
            if _fetch_add(ctl, _JOINED, 1) < ctl[_LIMIT]:
                _take_parts(ctl, seq)
            since = _cycles()
            continue
        hot = _load(ctl, _HOT)
        if hot > 0:
            _sched_yield(syscall)
            since = _cycles()
            continue
        if hot < 0 or _cycles() - since > spin_cycles:
            _store(ctl, _SLEEP, 1)
            if _load(ctl, _SEQ) == last and _load(ctl, _HOT) <= 0:
                _futex(syscall, _address(ctl, _SLEEP), _FUTEX_WAIT, 1)
            _store(ctl, _SLEEP, 0)
            since = _cycles()
            continue
        _pause()


# -- the Python side -------------------------------------------------------------------------------


def _syscall_address() -> int | None:
    if not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")):
        return None
    try:
        return ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value
    except (OSError, AttributeError):  # pragma: no cover - a libc without syscall()
        return None


_SYSCALL = _syscall_address()
_CTL = np.zeros(_CTL_WORDS, np.int64)
#: one job at a time: a caller that finds the team busy runs its kernel another way
_BUSY = threading.Lock()
#: "pid" -> the process whose workers were started; a forked child empties it
#: (_after_fork_in_child), so its being non-empty means this process's workers run
_STARTED: dict[str, int] = {}


#: what a pool loop or a threaded product subtracts from HOT while it runs (any count of
#: runs stays below it)
COLD = 1 << 20


def awake() -> bool:
    """Whether the workers are awake (spinning after a job, or kept awake by a hot run):
    a job given now starts on them within microseconds."""
    return bool(_STARTED) and _CTL[_SLEEP] == 0


def heat(delta: int) -> bool:
    """A large run starts (+1: workers stay awake, yielding their core, until every such
    run has ended) or ends (-1, only after a +1 that returned True). False (nothing done)
    where the platform has no team. A +1 starts the workers if no job has yet: a run
    whose session's last run offered the team several jobs will offer more, and jobs
    below their ``cold_total`` only go to awake workers (a model of 1M-8M multiply-add
    convolutions alone, never starting the team, ran them all on one thread)."""
    if _SYSCALL is None:
        return False
    if not _STARTED:
        if delta <= 0 or not _BUSY.acquire(blocking=False):
            return False  # (a job in flight has started them, or this is no start)
        try:
            if not _STARTED:
                _start(max(1, parallel.KERNEL_THREADS - 1))
        finally:
            _BUSY.release()
    team_heat(_CTL, delta, _SYSCALL)
    return True


def _cycles_per_us() -> float:
    c0, t0 = _tsc(), time.perf_counter()
    time.sleep(0.002)
    c1, t1 = _tsc(), time.perf_counter()
    return max((c1 - c0) / ((t1 - t0) * 1e6), 1.0)


@njit(cache=True)
def _tsc():
    return _cycles()


def _start(workers: int) -> None:
    # the workers of this process (a forked child starts its own: its parent's are not copied)
    spin = int(SPIN_US * _cycles_per_us())
    for i in range(workers):
        threading.Thread(target=team_worker, args=(_CTL, spin, _SYSCALL), name=f"onnxrt-team-{i}", daemon=True).start()
    _STARTED["pid"] = os.getpid()


def _after_fork_in_child() -> None:
    # the child has none of its parent's threads: a fresh control block, lock and workers
    # (a job in flight in the parent at the fork is not the child's: its caller's thread is
    # not copied either, except when the forking thread itself was the caller, which
    # cannot be: a team job runs in one compiled call, os.fork() never interrupts it)
    global _BUSY
    _CTL[:] = 0
    _BUSY = threading.Lock()
    _STARTED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# heat() does nothing before the team's first job (_STARTED empty)
parallel.register_native_hooks(heat=heat)


def available() -> bool:
    """Whether this platform has the team (Linux on x86-64)."""
    return _SYSCALL is not None


def run_kept(block: np.ndarray, block_address: int, slots, arrays, address, part, parts: int, workers: int) -> bool:
    """Run ``part(block address, i)`` for i in [0, parts) on the caller and ``workers`` team
    threads (``part``: a numba cfunc ``void(int64, int64)``, such as native.loops'
    ``*_part``); False (nothing ran) when the team is not available or busy with another
    caller's job. ``block`` is the job's int64 argument block (``block_address`` its
    address, or 0 to find it): the addresses of ``arrays`` go into its ``slots`` while the
    team is held, so concurrent callers of one kept block (a prepared job, _jit.TeamJob)
    never share it. Up to three arrays, by one compiled call (team_run_kept)."""
    if _SYSCALL is None or not _BUSY.acquire(blocking=False):
        return False
    try:
        if not _STARTED:  # emptied in a forked child (_after_fork_in_child)
            # as many workers as the process's kernel threads allow: each job takes at most
            # ``workers`` of them (the caller's session cap, onnxrt.context)
            _start(max(workers, parallel.KERNEL_THREADS - 1))
        n = len(arrays)
        if n <= 3:
            # unused slots get -1 and the block itself as a stand-in array
            a0 = arrays[0] if n > 0 else block
            a1 = arrays[1] if n > 1 else block
            a2 = arrays[2] if n > 2 else block
            team_run_kept(_CTL, part.address, block, slots[0] if n > 0 else -1, a0, slots[1] if n > 1 else -1, a1,
                          slots[2] if n > 2 else -1, a2, parts, workers, _SYSCALL)
        else:
            for slot, a in zip(slots, arrays):
                block[slot] = address(a)
            team_run(_CTL, part.address, block_address or address(block), parts, workers, _SYSCALL)
    finally:
        _BUSY.release()
    return True
