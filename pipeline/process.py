"""How a process that used Arrow or delta-rs ends: its native thread pools drained first.

A pyarrow dataset scan (what `DeltaTable.to_pyarrow_table()` runs) can return before Arrow's I/O
threads have finished releasing what the scan used: there the last reference to a read-ahead
buffer that wraps a Python object (delta-rs reads through a Python filesystem) is dropped on an
I/O thread, which must take the GIL to free it. If the interpreter is finalizing by then, that
thread is ended by `pthread_exit` while inside a C++ destructor, and the process aborts with
"terminate called without an active exception" (exit -6) after all its work was done
(apache/arrow#34314, apache/arrow#39862, delta-io/delta-rs#2184). `stomp-lake maintain
retain-captures` met it about once in fifteen runs.

`drain_native_thread_pools` waits, with the GIL released, until Arrow's CPU and I/O pools have no
task queued or running. It is registered with `atexit` when `pipeline` is imported, so any process
that imports the package (a CLI, a script, a notebook, an Airflow PythonOperator) drains the pools
before finalization; `exit_cleanly` and `run_main` are the one way entry points end.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

DRAIN_TIMEOUT_SECONDS = 30.0
_POLL_SECONDS = 0.002
GC_THRESHOLD = 500_000  # see fewer_collections

# Itanium C++ ABI names of the libarrow functions used (exported since Arrow 1.0; unchanged in 26).
_IO_POOL = "_ZN5arrow2io8internal15GetIOThreadPoolEv"  # arrow::io::internal::GetIOThreadPool()
_CPU_POOL = "_ZN5arrow8internal16GetCpuThreadPoolEv"  # arrow::internal::GetCpuThreadPool()
_NUM_TASKS = "_ZN5arrow8internal10ThreadPool11GetNumTasksEv"  # ThreadPool::GetNumTasks()

log = logging.getLogger(__name__)


class ArrowPools:
    """Arrow's two global thread pools, seen through libarrow's exported functions."""

    __slots__ = ("_num_tasks", "_pools")

    def __init__(self, library: ctypes.CDLL) -> None:
        pools = []
        for name in (_CPU_POOL, _IO_POOL):
            getter = getattr(library, name)
            getter.restype = ctypes.c_void_p
            getter.argtypes = []
            pools.append(getter())
        self._pools = [pool for pool in pools if pool]
        self._num_tasks = getattr(library, _NUM_TASKS)
        self._num_tasks.restype = ctypes.c_int
        self._num_tasks.argtypes = [ctypes.c_void_p]

    @classmethod
    def loaded(cls) -> ArrowPools | None:
        """The pools of the libarrow pyarrow loaded, or None when pyarrow was never imported (there
        is then nothing to drain, and importing it at exit would only cost time)."""
        pyarrow = sys.modules.get("pyarrow")
        if pyarrow is None:
            return None
        try:
            so_version = pyarrow.cpp_build_info.so_version
            library = Path(str(pyarrow.__file__)).with_name(f"libarrow.so.{so_version}")
            # CDLL (not PyDLL) releases the GIL during each call; the library is already loaded,
            # so this only returns a handle to it.
            return cls(ctypes.CDLL(str(library)))
        except (AttributeError, OSError) as error:  # another platform or build: nothing to wait on
            log.debug("Arrow thread pools not reachable: %s", error)
            return None

    def busy_tasks(self) -> int:
        """Tasks queued or running in either pool."""
        return sum(self._num_tasks(pool) for pool in self._pools)


@contextlib.contextmanager
def fewer_collections(threshold: int = GC_THRESHOLD) -> Iterator[None]:
    """The cyclic garbage collector's first generation collected every ``threshold`` new
    containers instead of Python's 700 while the block runs: the flow pass makes millions of
    short-lived dicts and tuples (rows, events) and almost no cycles, and the default cost it
    about a tenth of its CPU time. Memory stays bounded: collections are fewer, not off, and
    the containers counted are those made and not yet freed, so a collection is due after at
    most ``threshold`` of them whatever the input. A whole flow pass over 100 MB leaves about
    40 objects for the collector; 500,000 (about 100 MB, were they all garbage) against
    50,000 took the pass from 1.68 to 1.59 s (the collections walked the rows held for the
    writer again and again)."""
    previous = gc.get_threshold()
    gc.set_threshold(threshold, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def give_back_memory() -> None:
    """Returns what a finished task freed to the operating system: Python's cycles collected,
    Arrow's pool trimmed, and glibc's free lists given back (``malloc_trim``). A reused Python
    worker otherwise holds its largest task's memory while it idles: with one 4.69 GB
    connection, the flow pass's two workers held 540 MB through the whole validation, which
    is when the JVM's heap peaks."""
    gc.collect()
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def drain_native_thread_pools(timeout: float = DRAIN_TIMEOUT_SECONDS) -> bool:
    """Wait until Arrow's thread pools have no task queued or running, at most `timeout` seconds.

    True when they are idle (or pyarrow was never loaded); False when the time ran out, in which
    case the caller exits anyway. The wait sleeps, so a pool thread that needs the GIL gets it.
    """
    pools = ArrowPools.loaded()
    if pools is None:
        return True
    deadline = time.monotonic() + timeout
    while pools.busy_tasks() > 0:
        if time.monotonic() >= deadline:
            print(
                f"warning: Arrow thread pools still busy after {timeout:g} s at exit",
                file=sys.stderr,
            )
            return False
        time.sleep(_POLL_SECONDS)
    return True


def exit_cleanly(code: int) -> NoReturn:
    """End the process with `code` once its native pools are drained and its output flushed.

    `os._exit` skips interpreter teardown: nothing is left to do there once the pools are idle,
    and a Spark JVM started by this process exits by itself when its stdin closes."""
    drain_native_thread_pools()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """The `if __name__ == "__main__"` of every entry point: `main()`, then `exit_cleanly`.

    An uncaught exception prints its traceback and exits 1, as Python does; SystemExit (argparse's
    `--help` and usage errors) keeps its code; output piped to a reader that left (`| head`) ends
    it quietly with 141, a shell's code for SIGPIPE."""
    try:
        code = main()
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # the reader left (`| head`): nothing more to say, as shell tools do
        code = 141
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    exit_cleanly(code or 0)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)  # sys.exit("message") prints the message and exits 1
    return 1


atexit.register(drain_native_thread_pools)
