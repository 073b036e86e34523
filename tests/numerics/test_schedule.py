"""The products' dynamic schedule (``jit.claim``): every task is taken exactly once whatever the threads race for,
and a thread held up on one task leaves the rest to the others — the property that keeps a product's time from
doubling when one of two cores is lent away (another process, a hypervisor's steal)."""

import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

from streamed.numerics.jit import claim, threads


@intrinsic
def _peek(typingctx, counter):
    """``counter[0]`` read atomically: a load the compiler may not hoist out of a waiting loop."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.load_atomic(data, "monotonic", 8)

    return types.int64(counter), codegen


@numba.njit(parallel=True)
def _take_all(tasks, nthreads, taker):
    """Each of ``nthreads`` threads claims tasks until none is left, writing its index into ``taker[task]`` and
    counting how often a task was seen in ``taker[tasks + task]``."""
    taken = np.zeros(1, np.int64)
    for t in prange(nthreads):
        c = claim(taken)
        while c < tasks:
            taker[c] = t
            taker[tasks + c] += 1
            s = 0.0
            for i in range(200):  # about a microsecond: the threads' claims interleave throughout
                s += np.sqrt(i + c)
            taker[c] += int(s < 0)
            c = claim(taken)


@numba.njit(parallel=True)
def _one_held_up(tasks, spins, done):
    """Two threads; whichever claims task 0 waits (up to ``spins`` rounds) until every other task has been claimed
    before it claims again. ``done[task]`` gets the index of the thread (0 or 1) that ran it."""
    taken = np.zeros(1, np.int64)
    for t in prange(2):
        c = claim(taken)
        while c < tasks:
            if c == 0:
                s = 0
                while _peek(taken) < tasks and s < spins:  # the other thread is taking the rest meanwhile
                    s += 1
            done[c] = t
            c = claim(taken)


def test_every_task_is_taken_exactly_once_however_the_threads_race():
    tasks = 50_000
    taker = np.zeros(2 * tasks, np.int64)
    _take_all(tasks, threads(), taker)
    assert (taker[tasks:] == 1).all(), f"{int((taker[tasks:] != 1).sum())} tasks taken other than once"


def test_a_thread_held_up_on_one_task_leaves_every_other_task_to_the_rest():
    assert numba.get_num_threads() >= 2, "needs two of numba's threads (NUMBA_NUM_THREADS)"
    tasks = 64
    done = np.full(tasks, -1, np.int64)
    _one_held_up(tasks, 10**9, done)
    held = done[0]
    assert (done[1:] == 1 - held).all(), f"the held-up thread ran tasks {np.flatnonzero(done == held).tolist()}"
