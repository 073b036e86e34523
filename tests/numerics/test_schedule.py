"""The products' dynamic schedule (``jit.claim``): every task is taken exactly once whatever the threads race for,
and a thread held up on one task leaves the rest to the others — the property that keeps a product's time from
doubling when one of two cores is lent away (another process, a hypervisor's steal). And the threads the products
run on (``jit.on_threads``): a worker once on each."""

import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

from streamed.numerics.jit import claim, on_threads, threads


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


# ---- on_threads: a worker on each of numba's threads, without a parallel loop ----------------------------------------


def _count_calls(calls, seen, done, taken):
    """An ``on_threads`` worker: counts its call (``calls[0]``), marks the thread it runs on (``seen``), then takes
    tasks as ``claim`` gives them from the call's counter (``taken``, made by ``on_threads``), counting each in
    ``done``."""
    claim(calls)
    seen[numba.get_thread_id()] += 1
    c = claim(taken)
    while c < done.shape[0]:
        done[c] += 1
        c = claim(taken)


_counted = on_threads(_count_calls)


@numba.njit
def _run_counted(nthreads, calls, seen, done):
    _counted(nthreads, (calls, seen, done))


def test_a_worker_on_threads_runs_once_on_each_thread_and_its_tasks_are_each_taken_once():
    n = threads()
    calls, seen, done = np.zeros(1, np.int64), np.zeros(n, np.int64), np.zeros(20_000, np.int64)
    _run_counted(n, calls, seen, done)
    assert calls[0] == n, f"the worker ran {calls[0]} times on {n} threads"
    assert (seen == 1).all(), f"calls per thread: {seen.tolist()}"
    assert (done == 1).all(), f"{int((done != 1).sum())} tasks taken other than once"


def test_each_call_on_threads_takes_its_tasks_from_a_counter_of_its_own_starting_at_zero():
    n = threads()
    for call in range(3):
        done = np.zeros(1000 * (call + 1), np.int64)
        _run_counted(n, np.zeros(1, np.int64), np.zeros(n, np.int64), done)
        assert (done == 1).all(), f"call {call}: {int((done != 1).sum())} of {done.size} tasks taken other than once"


def test_a_kernel_on_threads_whose_worker_makes_arrays_returns_while_python_traces_allocations(tmp_path):
    """A worker's arrays are allocated through Python's raw allocator, whose hooks (``tracemalloc``'s) take the GIL:
    the caller must not hold it while the threads run. Run in a process of its own so that a hang fails, not
    waits."""
    import subprocess
    import sys

    script = tmp_path / "traced.py"
    script.write_text(
        "import tracemalloc\n"
        "import numpy as np\n"
        "from streamed.numerics import product\n"
        "tracemalloc.start()\n"
        "x = np.ones((1, 3, 64), np.float32)\n"
        "w = np.ones((64, 40), np.float32)\n"
        "out = product.product(x, w)\n"
        "assert float(out[0, 0, 0]) == 64.0, out\n"
        "print('returned')\n")
    try:
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("a product under tracemalloc did not return in 120 s: its threads wait for the GIL")
    assert p.returncode == 0 and "returned" in p.stdout, p.stderr
