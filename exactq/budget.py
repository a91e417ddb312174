"""Budgets checked before allocating: memory, states, points.

Every path that builds something sized by user input (a PRISM exploration, a truncated
chain, a sweep grid, an export, a factorisation) predicts the bytes it needs first and
asks :func:`require_memory`; over the budget, the user gets one line naming what would
be built, its size and the budget, never a ``MemoryError`` after minutes of work.

The memory budget is the memory the machine can still give (``MemAvailable``) times
:data:`BUDGET_FRACTION`, or the environment variable ``EXACTQ_MEMORY_BUDGET`` (bytes,
or a number with a unit: ``8GiB``, ``500MB``). No fixed cap: a machine with more
memory builds more.
"""

from __future__ import annotations

import os
import re

from .errors import ExactqError

__all__ = ["BudgetError", "available_memory", "memory_budget", "require_memory", "require_states", "format_bytes",
           "parse_bytes", "as_size", "tune_allocator", "BUDGET_FRACTION", "CHAIN_BYTES_PER_STATE", "MALLOC_SETTINGS"]

#: share of the available memory one computation may plan to use
BUDGET_FRACTION = 0.8
#: a lower bound of the memory one state of a sparse chain takes to be built and solved (bytes). Measured
#: (peak RSS over the states, one solve): birth-death chains 680 (mmck capacity=2e6, mm1 truncation 2e6),
#: jsq 720 (two queues) to 2700 (three), round-robin 2300, mph1 990; a prediction from it can only err low
CHAIN_BYTES_PER_STATE = 512

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6, "mib": 2**20,
          "g": 1e9, "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12, "tib": 2**40}


class BudgetError(ExactqError, MemoryError):
    """What a computation would allocate exceeds the budget (the message names it, its size and the budget)."""


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def _status_bytes(key: str) -> int | None:
    """A size from ``/proc/self/status`` (``VmSize``, ``VmRSS``) in bytes."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return None


def _process_limit() -> int | None:
    """What this process may still allocate under its own limit (``ulimit -v``: RLIMIT_AS), if it has one."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, AttributeError):  # pragma: no cover - not POSIX
        return None
    if soft in (resource.RLIM_INFINITY, -1) or soft <= 0:
        return None
    return max(int(soft) - (_status_bytes("VmSize") or 0), 0)


def _cgroup_limit() -> int | None:
    """What the control group (a container's memory limit, cgroup v2) may still give, if it has a limit."""
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            text = fh.read().strip()
        if text == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            return max(int(text) - int(fh.read().strip()), 0)
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Memory this process can still get: the least of ``MemAvailable``, its ``ulimit -v`` and its cgroup's limit.

    None where none of them is known.
    """
    known = [v for v in (_meminfo_available(), _process_limit(), _cgroup_limit()) if v is not None]
    return min(known) if known else None


def parse_bytes(text: str) -> int:
    """``"8GiB"``, ``"500 MB"``, ``"1e9"`` as a number of bytes.

    Examples
    --------
    >>> parse_bytes("2GiB"), parse_bytes("1.5e6"), parse_bytes("64 kb")
    (2147483648, 1500000, 64000)
    """
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"a memory size must look like 8GiB, 500MB or 1e9; got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def memory_budget() -> int | None:
    """The bytes one computation may plan to allocate (None where the machine does not say).

    ``EXACTQ_MEMORY_BUDGET`` overrides the default of :data:`BUDGET_FRACTION` of the
    available memory.
    """
    env = os.environ.get("EXACTQ_MEMORY_BUDGET")
    if env:
        try:
            return parse_bytes(env)
        except ValueError as exc:
            raise BudgetError(f"EXACTQ_MEMORY_BUDGET: {exc}") from None
    avail = available_memory()
    return None if avail is None else int(avail * BUDGET_FRACTION)


def format_bytes(n: float) -> str:
    """A size for people: ``1.5 GiB``, ``312 MiB``, ``20 KiB``, ``12 B``.

    Examples
    --------
    >>> format_bytes(3 * 2**30), format_bytes(1536 * 2**10), format_bytes(12)
    ('3 GiB', '1.5 MiB', '12 B')
    """
    n = float(n)
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def require_memory(nbytes: float, what: str, *, hint: str = "") -> None:
    """Raise :class:`BudgetError` if ``nbytes`` exceed the memory budget.

    Parameters
    ----------
    nbytes : float
        The predicted allocation (a bound is fine; ``inf`` always fails).
    what : str
        What would be allocated, naming the parameter that sizes it, e.g.
        ``"the truncated chain (capacity=100000000: 1e8 states)"``.
    hint : str
        What the user can do instead (appended after a semicolon).

    Examples
    --------
    >>> require_memory(1e3, "a tiny table")
    >>> try:
    ...     require_memory(float("inf"), "the grid (1e400 points)")
    ... except BudgetError as e:
    ...     print(str(e).split(",")[0])
    the grid (1e400 points) would need about inf bytes
    """
    budget = memory_budget()
    if nbytes != nbytes:  # NaN: the prediction itself failed
        nbytes = float("inf")
    if budget is None and nbytes != float("inf"):
        return
    if budget is None or nbytes > budget:
        size = "inf bytes" if nbytes == float("inf") else format_bytes(nbytes)
        limit = "unknown" if budget is None else format_bytes(budget)
        tail = f"; {hint}" if hint else ""
        raise BudgetError(f"{what} would need about {size}, above the memory budget of {limit} "
                          f"(EXACTQ_MEMORY_BUDGET changes it){tail}")


def as_size(n) -> float:
    """A count (an int of any size) as a float: ``inf`` beyond the double range.

    Examples
    --------
    >>> as_size(10), as_size(10**400)
    (10.0, inf)
    """
    try:
        return float(n)
    except OverflowError:
        return float("inf")


def require_states(n_states: float, what: str, *, bytes_per_state: float = CHAIN_BYTES_PER_STATE,
                   hint: str = "") -> None:
    """:func:`require_memory` for a chain of ``n_states`` states at ``bytes_per_state`` (a lower bound) each.

    Examples
    --------
    >>> require_states(1000, "a small chain")
    >>> try:
    ...     require_states(1e30, "the chain (capacity=1e30)")
    ... except BudgetError as e:
    ...     print(str(e).split(" would")[0])
    the chain (capacity=1e30): 1e+30 states
    """
    n = as_size(n_states)
    require_memory(n * bytes_per_state, f"{what}: {n:.3g} states", hint=hint)


#: glibc ``mallopt`` settings :func:`tune_allocator` applies (parameter number, value in bytes): arrays below
#: 32 MiB come from the heap instead of a fresh ``mmap`` each, and up to 256 MiB of freed heap stays in the
#: process (glibc's defaults: a threshold that starts at 128 KiB and a 128 KiB trim). A solve creates and
#: drops many temporaries of a few MB (a vector per Krylov step, a sparse matrix per restriction); with
#: the defaults each is fresh memory, faulted in page by page (0.3-9 us a page in a VM, most where the
#: host reclaims freed guest memory). Measured in process, build and every property, median of 5 runs
#: each (2-core VM): herman 13 0.41 -> 0.28 s, nand 20x2 0.214 -> 0.178 s, FMS 4 0.120 -> 0.109 s,
#: BRP 64x5 0.032 -> 0.031 s.
MALLOC_SETTINGS = {"M_MMAP_THRESHOLD": (-3, 32 << 20), "M_TRIM_THRESHOLD": (-1, 256 << 20),
                   "M_TOP_PAD": (-2, 16 << 20)}

_TUNED: list = []


def tune_allocator() -> bool:
    """Apply :data:`MALLOC_SETTINGS` once per process (``import exactq`` calls it); True when applied.

    Only with glibc (elsewhere nothing changes), and not when the environment variable
    ``EXACTQ_MALLOC_TUNING`` is ``0`` (then glibc's defaults stay, and freed memory goes back
    to the system sooner). The cost of the settings: a process may hold up to 256 MiB of
    freed memory for reuse after a large solve; its peak is unchanged.

    Examples
    --------
    >>> tune_allocator() in (True, False)
    True
    """
    if _TUNED:
        return _TUNED[0]
    ok = False
    if os.environ.get("EXACTQ_MALLOC_TUNING", "1").strip() not in ("0", "off", "no", "false"):
        try:
            import ctypes

            if os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
                mallopt = ctypes.CDLL(None).mallopt
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                ok = all(mallopt(param, value) == 1 for param, value in MALLOC_SETTINGS.values())
        except (OSError, AttributeError, ImportError, ValueError):  # pragma: no cover - no glibc, no ctypes
            ok = False
    _TUNED.append(ok)
    return ok
