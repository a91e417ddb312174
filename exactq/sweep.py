"""Parameter sweeps: one study, one tidy table, on one core, all cores or a Dask cluster.

A *study* is a model, its fixed parameters, one or more swept parameters (their
cartesian product is the grid), a measure and a method. :func:`sweep` solves every
point of the grid with :func:`exactq.solve` and returns a tidy table with one row per
point::

    <swept parameters> <fixed parameters> measure method tol value lower upper
    error_estimate n_states truncation seconds method_used status message

``status`` is ``ok`` or ``error``. A point whose parameters are invalid or unstable,
or whose solve fails, is a row with ``status="error"`` and the one-line reason in
``message`` (warnings of a successful solve go into ``message`` too): a failure never
ends the study. ``method`` is the method asked for (``auto`` included),
``method_used`` the one that produced the value (``ctmc/direct``), ``truncation`` the
final truncation level of a truncated method.

Grid specifications
-------------------
``start:stop:num``
    ``num`` values from ``start`` to ``stop``, both included, equally spaced.
``start:stop:num:log``
    ``num`` values from ``start`` to ``stop``, both included, geometrically spaced
    (``start`` and ``stop`` > 0).
``a|b|c``
    explicit values; a value may itself be a list (``service_rates=1,1|1,2``).

Grid values of an integer parameter must be integers (duplicates of a geometric grid
are dropped); float values are rounded to 15 significant digits (``0.6``, not
``0.6000000000000001``). ``method`` and ``measure`` may be swept like parameters, with
explicit values (``method=ctmc|compensation``).

Files and resumption
--------------------
``out`` is a ``.csv``, ``.json`` (an array of row objects) or ``.parquet`` file
(``pandas`` and ``pyarrow``). Rows are written as their points finish, so an
interrupted study keeps what it computed, and the file is rewritten in grid order at
the end. A study run again on the same file skips the points already there with
status ``ok`` (same parameters, measure, method and tol) and computes only the
others; ``force=True`` recomputes every point. Rows of the file that are not points
of the study are kept. A vector measure (``mean_queue_lengths``) is a list in JSON
and one column per component in CSV and Parquet: ``value_1``, ``value_2``, ...
(``lower_i``, ``upper_i`` likewise), numbered from 1 like the queues ``q1``, ``q2``.

Backends
--------
``serial`` solves the points in this process; ``processes`` (the default) on a local
pool over all cores; ``dask`` on a ``dask.distributed`` cluster (``scheduler``: an
address ``tcp://HOST:PORT`` or a ``Client``; none starts a ``LocalCluster``). Each
backend receives the model's name and its parameters, never a built chain, and every
point is solved on one BLAS thread, so the values are bit-identical across backends.
See :mod:`exactq.backends` for the scheduling (batches of fast points, the most
expensive points first, no pool at all when the work is too small to pay for one).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .backends import _one_line, run_batch, run_point  # a point and a batch of points, as every backend solves them
from .budget import as_size, require_memory
from .errors import ExactqError, FileError, ModelError, NotApplicableError, file_error
from .options import CONTROLS, check_tol, check_workers
from .params import check_names, param_table

__all__ = ["sweep", "parse_spec", "read_table", "write_table", "Study", "run_point", "run_batch", "TABLE_COLUMNS"]

#: the columns after the parameters, in order
TABLE_COLUMNS = ("measure", "method", "tol", "value", "lower", "upper", "error_estimate", "n_states", "truncation",
                 "seconds", "method_used", "status", "message")
#: the swept names that are not model parameters
SPECIAL_AXES = ("method", "measure")
#: columns holding a value that may be a vector (one column per component in CSV/Parquet)
VECTOR_COLUMNS = ("value", "lower", "upper")
FORMATS = (".csv", ".json", ".parquet")
#: memory one point of a sweep holds while it runs: its task, its key and its row (measured 1.4 KiB on a
#: one-parameter jsq study; the final table doubles the row)
POINT_BYTES = 2048
#: memory one value of a swept axis takes (a float in an array, then in a list)
AXIS_VALUE_BYTES = 40
_INT_KINDS = ("int", "int_or_inf")
_FLOAT_KINDS = ("float", "float_or_inf")


# ------------------------------------------------------------------------- grid
def _round15(x: float) -> float:
    return float(f"{x:.15g}")


def _number(text: str):
    """``text`` as an int or a float if it is one (finite), else ``None``."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def parse_spec(name: str, spec: Any, kind: str | None = None) -> list:
    """The values of one swept parameter.

    Parameters
    ----------
    name : str
        The parameter's name (for messages).
    spec : str or sequence
        ``"start:stop:num"``, ``"start:stop:num:log"``, ``"a|b|c"`` or a sequence of
        values (module docstring).
    kind : str, optional
        The parameter's kind (:class:`exactq.params.Param`): integer kinds need integer
        grid values, float kinds get numbers.

    Returns
    -------
    list
        Numbers for numeric parameters, the text of list values (``"1,2"``), the
        strings of other values.

    Raises
    ------
    ModelError
        A malformed specification, naming the parameter, the rule and the value.

    Examples
    --------
    >>> parse_spec("arrival_rate", "0.5:0.9:5")
    [0.5, 0.6, 0.7, 0.8, 0.9]
    >>> parse_spec("tol", "1e-3:1e-9:4:log")
    [0.001, 1e-05, 1e-07, 1e-09]
    >>> parse_spec("servers", "1:1000:4:log", kind="int")
    [1, 10, 100, 1000]
    >>> parse_spec("service_rates", "1,1|1,2", kind="floats")
    ['1,1', '1,2']
    """
    import numpy as np

    if not isinstance(spec, str):
        values = list(spec)
        if not values:
            raise ModelError(f"--over {name}: the list of values is empty")
        return [_cell(v, kind) for v in values]
    text = spec.strip()
    if "|" in text or ":" not in text:
        items = [t.strip() for t in text.split("|")]
        if any(t == "" for t in items):
            raise ModelError(f"--over {name}={spec}: values separated by | must not be empty")
        return [_cell(t, kind) for t in items]
    parts = [p.strip() for p in text.split(":")]
    log = len(parts) == 4 and parts[3].lower() == "log"
    if len(parts) not in (3, 4) or (len(parts) == 4 and not log):
        raise ModelError(f"--over {name}={spec}: a grid is start:stop:num or start:stop:num:log")
    start, stop, num = _number(parts[0]), _number(parts[1]), _number(parts[2])
    if start is None or stop is None:
        raise ModelError(f"--over {name}={spec}: start and stop must be finite numbers")
    if not isinstance(num, int) or num < 1:
        raise ModelError(f"--over {name}={spec}: num must be an integer >= 1; got {parts[2]!r}")
    if log and (start <= 0 or stop <= 0):
        raise ModelError(f"--over {name}={spec}: a log grid needs start > 0 and stop > 0")
    if num == 1 and start != stop:
        raise ModelError(f"--over {name}={spec}: num = 1 needs start = stop")
    require_memory(num * AXIS_VALUE_BYTES, f"--over {name}={spec}: {num:.3g} values", hint="use a smaller num")
    grid = np.geomspace(start, stop, num) if log else np.linspace(start, stop, num)
    if kind in _INT_KINDS:
        out: list = []
        for v in grid:
            if abs(v - round(v)) > 1e-9 * max(1.0, abs(v)):
                raise ModelError(f"--over {name}={spec}: {name} is an integer parameter; the grid gives {v:.6g}")
            if int(round(v)) not in out:
                out.append(int(round(v)))
        return out
    return [_round15(float(v)) for v in grid]


def spec_length(name: str, spec: Any) -> int:
    """The number of values a specification gives (at most: a geometric integer grid drops duplicates), cheaply.

    Nothing is materialised, so that a study's grid can be priced before it is built.

    Examples
    --------
    >>> spec_length("arrival_rate", "0.1:0.9:100000000"), spec_length("service_rates", "1,1|1,2")
    (100000000, 2)
    """
    if not isinstance(spec, str):
        try:
            return len(spec)
        except TypeError:
            raise ModelError(f"--over {name}: a grid is a string start:stop:num or a list of values; "
                             f"got {type(spec).__name__}") from None
    text = spec.strip()
    if "|" in text or ":" not in text:
        return len(text.split("|"))
    parts = [p.strip() for p in text.split(":")]
    num = _number(parts[2]) if len(parts) in (3, 4) else None
    if not isinstance(num, int) or num < 1:
        parse_spec(name, spec)  # the one-line error of a malformed grid
    return int(num)


def _text(x: Any) -> str:
    """A number as it would be typed (``1`` for 1.0)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


def _cell(value: Any, kind: str | None = None) -> Any:
    """A parameter value as it is stored in the table and handed to the model.

    Lists become their comma-separated text, numeric text becomes a number (an int for
    integer kinds), anything else stays as given.
    """
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_text(v.item() if isinstance(v, np.generic) else v) for v in value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        s = value.strip()
        if kind in _INT_KINDS + _FLOAT_KINDS or kind is None:
            n = _number(s)
            if n is not None:
                return int(n) if kind in _INT_KINDS and float(n).is_integer() else (float(n) if kind in _FLOAT_KINDS
                                                                                    else n)
        return s
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        if kind in _INT_KINDS and value.is_integer():
            return int(value)
        return value
    if isinstance(value, int) and kind in _FLOAT_KINDS:
        return float(value)
    return value


def _norm(value: Any) -> str:
    """A canonical text of a cell, for matching rows of a file with points of a study."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return "inf" if isinstance(value, float) and math.isinf(value) else repr(float(value))
    s = str(value).strip()
    if "," in s:
        return ",".join(_norm(p) for p in s.split(","))
    n = _number(s)
    return repr(float(n)) if n is not None else s.lower()


class Study:
    """A model, its fixed parameters, the swept axes, a measure and a method: the grid of a sweep.

    Parameters are validated at construction (unknown model, parameter, measure or
    method, malformed grids: :class:`~exactq.errors.ModelError`); the values of a
    point are validated only when it is solved, and a bad point is a row, not an
    error.
    """

    def __init__(self, model: str, fixed: dict | None, over: dict | Sequence, *, measure: str | None = None,
                 method: str = "auto", tol: float = 1e-9, options: dict | None = None,
                 solve_options: dict | None = None):
        from .api import stationary_solvers
        from .catalogue import get_model

        if not isinstance(model, str):
            raise ModelError("sweep needs the model's name (the points are built from it); "
                             f"got {type(model).__name__}")
        self.model = model
        self.cls = get_model(model)
        params = param_table(self.cls.parameters)  # the declared names and their aliases (total_arrival_rate)
        items = list(over.items()) if isinstance(over, dict) else list(over or ())
        if not items:
            raise ModelError("sweep needs at least one swept parameter (--over NAME=SPEC)")
        fixed = dict(fixed or {})
        seen: list[str] = []
        lengths = []
        for name, spec in items:
            if name not in params and name not in SPECIAL_AXES:
                raise ModelError(f"--over {name}: unknown parameter {name!r} for model {model}; "
                                 f"valid: {', '.join(list(params) + list(SPECIAL_AXES))}")
            if name in fixed:
                raise ModelError(f"parameter {name} is both fixed ({name}={fixed[name]}) and swept")
            if name in seen:
                raise ModelError(f"--over {name} given twice")
            seen.append(name)
            lengths.append(spec_length(name, spec))
        # the grid is priced (a product of lengths) before any axis is built: one row per point is kept
        total = math.prod(lengths)
        require_memory(as_size(total) * POINT_BYTES, f"the sweep's grid ({' x '.join(map(str, lengths))} = "
                       f"{as_size(total):.3g} points, {POINT_BYTES} B each)", hint="sweep fewer points, or split "
                       "the study into several tables")
        self.axes: list[tuple[str, list]] = []
        for name, spec in items:
            kind = params[name].kind if name in params else "str"
            self.axes.append((name, parse_spec(name, spec, kind)))
        for name in fixed:
            if name not in params:
                raise ModelError(f"unknown parameter {name!r} for model {model}; valid: {', '.join(params)}")
        check_names(self.cls.parameters, [*seen, *fixed])  # not arrival_rate and total_arrival_rate together
        self.fixed = {k: _cell(v, params[k].kind) for k, v in fixed.items()}
        measures = dict(self.axes).get("measure", [measure if measure is not None else self.cls.default_measure])
        for m in measures:
            if m not in self.cls.measures:
                raise ModelError(f"unknown measure {m!r} for model {model}; valid: {', '.join(self.cls.measures)}")
        self.measure = measures[0]
        own = ["auto", *self.cls.methods]
        for m in dict(self.axes).get("method", [method]):
            if m in own:
                continue
            valid_methods = own + (stationary_solvers() if "ctmc" in self.cls.methods else [])  # the registry's
            if m not in valid_methods:
                raise NotApplicableError(f"method {m!r} does not apply to model {model}; valid: "
                                         f"{', '.join(valid_methods)}")
        self.method = method
        self.tol = check_tol(tol)
        self.options = dict(options or {})
        self.solve_options = dict(solve_options or {})
        for key in ("truncation", "time_limit"):  # validated once for the study, as solve validates them
            if key in self.solve_options:
                self.solve_options[key] = CONTROLS[key](self.solve_options[key])
        self.param_names = [n for n, _ in self.axes if n not in SPECIAL_AXES] + list(self.fixed)

    @property
    def columns(self) -> list[str]:
        """The table's columns (vector components are added as results arrive)."""
        return [n for n, _ in self.axes if n not in SPECIAL_AXES] + list(self.fixed) + list(TABLE_COLUMNS)

    @property
    def size(self) -> int:
        """The number of points: the product of the axes' lengths."""
        return math.prod(len(v) for _, v in self.axes)

    def points(self) -> Iterator[dict]:
        """The tasks of the grid, in grid order (the last axis varies fastest), one at a time."""
        import itertools

        names = [n for n, _ in self.axes]
        for combo in itertools.product(*(v for _, v in self.axes)):
            chosen = dict(zip(names, combo))
            params = {n: chosen[n] for n in names if n not in SPECIAL_AXES}
            params.update(self.fixed)
            yield {"model": self.model, "params": params,
                   "measure": chosen.get("measure", self.measure), "method": chosen.get("method", self.method),
                   "tol": self.tol, "options": dict(self.options), "solve": dict(self.solve_options)}

    def task_key(self, task: dict) -> tuple:
        """:meth:`key` of a task."""
        return self.key({**task["params"], "measure": task["measure"], "method": task["method"], "tol": task["tol"]})

    def key(self, row: dict) -> tuple:
        """What identifies a point: its parameters, measure, method and tol."""
        return (tuple(_norm(row.get(n)) for n in self.param_names), str(row.get("measure")),
                str(row.get("method")), _norm(row.get("tol")))

    def precheck(self, tasks: Iterable[dict]) -> None:
        """Reject method options that no point could use (bad input, not failed points)."""
        if not self.options:
            return
        from .api import COMMON_OPTIONS, model as build, resolve_method
        from .catalogue import check_method_for

        seen = set()
        for task in tasks:
            if task["method"] in seen or task["method"] == "auto":
                continue
            try:
                m = build(self.model, **task["params"])
            except ExactqError:
                continue
            seen.add(task["method"])
            name, _ = resolve_method(m, task["method"])
            spec = check_method_for(m, name)
            valid = [o for o in spec.options if o not in COMMON_OPTIONS]
            for key in self.options:
                if key not in valid:
                    raise NotApplicableError(f"option {key!r} does not apply to method {name!r}; "
                                     f"valid: {', '.join(valid) or '(none)'}")


# ------------------------------------------------------------------------ table
def _flat(row: dict) -> dict:
    """The row with vector values spread over ``value_1``, ``value_2``, ... (CSV, Parquet)."""
    out = {}
    for k, v in row.items():
        if k in VECTOR_COLUMNS and isinstance(v, (list, tuple)):
            out[k] = None
            for i, x in enumerate(v, 1):
                out[f"{k}_{i}"] = x
        else:
            out[k] = v
    return out


def _gather(row: dict) -> dict:
    """Inverse of :func:`_flat`: component columns back into one list."""
    out: dict = {}
    parts: dict = {}
    for k, v in row.items():
        base, _, idx = k.rpartition("_")
        if base in VECTOR_COLUMNS and idx.isdigit():
            if v is not None:
                parts.setdefault(base, {})[int(idx)] = v
            continue
        out[k] = v
    for base, comp in parts.items():
        if out.get(base) is None and comp:
            out[base] = [comp.get(i) for i in range(1, max(comp) + 1)]
    return out


def _columns(rows: Iterable[dict], first: Sequence[str] = ()) -> list[str]:
    """Every column of ``rows``, ``first`` leading, the components after their base column."""
    cols = list(first)
    for r in rows:
        for k in r:
            if k not in cols:
                base, _, idx = k.rpartition("_")
                if base in cols and idx.isdigit():  # value_3 after value_2 (or value)
                    at = cols.index(base)
                    while at + 1 < len(cols) and cols[at + 1].rpartition("_")[0] == base:
                        at += 1
                    cols.insert(at + 1, k)
                else:
                    cols.append(k)
    return cols


def _csv_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "inf" if v == math.inf else ("-inf" if v == -math.inf else ("nan" if v != v else repr(v)))
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def _csv_value(s: str, column: str = "") -> Any:
    if s == "":
        return None
    if s in ("inf", "-inf", "nan"):  # a bound or a value; a parameter keeps its text (capacity=inf)
        return float(s) if column.rpartition("_")[0] in VECTOR_COLUMNS or column in _NUMERIC_JSON else s
    n = _number(s)
    if n is not None and not (isinstance(n, int) and s.lstrip("+-").startswith("0") and len(s.lstrip("+-")) > 1):
        return n
    return s


def _json_ready(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if v != v else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [_json_ready(x) for x in v]
    return v


_NUMERIC_JSON = ("value", "lower", "upper", "error_estimate", "seconds", "tol")


def _from_json(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if k in _NUMERIC_JSON and isinstance(v, str) and v in ("inf", "-inf"):
            v = float(v)
        elif k in _NUMERIC_JSON and isinstance(v, list):
            v = [float(x) if isinstance(x, str) and x in ("inf", "-inf") else x for x in v]
        out[k] = v
    return out


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ModelError(f"out must end in {', '.join(FORMATS)}; got {str(path)!r}")
    return suffix


def read_table(path: str | Path) -> list[dict]:
    """The rows of a sweep table (``.csv``, ``.json`` or ``.parquet``) as dicts.

    Numbers come back as numbers, empty cells as ``None`` and component columns
    (``value_1``, ``value_2``, ...) as one list under ``value``.
    """
    path = Path(path)
    kind = _format(path)
    if kind in (".json", ".csv"):  # a torn last row is dropped with a warning; other damage is one line
        return _read_for_resume(path)[0]
    try:
        pd = _pandas("reading a .parquet table")
        frame = pd.read_parquet(path)
        rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
        return [_gather(r) for r in rows]
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"cannot read the table {str(path)!r}: {_one_line(str(exc))}") from None


def _check_writable(path: Path) -> None:
    """Refuse, in one line, an ``out`` whose folder is missing, not a folder, or not writable."""
    folder = path.parent if str(path.parent) not in ("", ".") else Path(".")
    if not folder.exists():
        raise FileError(f"cannot write {str(path)!r}: the folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise FileError(f"cannot write {str(path)!r}: {str(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK):
        raise FileError(f"cannot write {str(path)!r}: the folder {str(folder)!r} is not writable")
    if path.exists() and (path.is_dir() or not os.access(path, os.W_OK)):
        raise FileError(f"cannot write {str(path)!r}: " + ("it is a folder" if path.is_dir() else "it is read-only"))


def _read_for_resume(path: Path) -> tuple[list[dict], list[str]]:
    """The rows of an existing table and its columns, a torn last row dropped with a warning.

    A study killed while it appends a row leaves the file without its final newline
    (CSV) or without its closing bracket (JSON); that last row is dropped and its point
    recomputed. Any other damage is an error naming the row.
    """
    kind = _format(path)
    if kind == ".parquet":
        rows = read_table(path)
        return rows, _columns([_flat(r) for r in rows])
    try:
        with open(path, newline="") as fh:
            text = fh.read()
    except OSError as exc:
        raise file_error(exc, "read", path) from None
    except UnicodeDecodeError as exc:
        raise ModelError(f"cannot read the table {str(path)!r}: not UTF-8 text (byte {exc.start})") from None
    if kind == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = _torn_json(path, text)
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ModelError(f"{path}: a sweep table in JSON is an array of row objects")
        rows = [_from_json(r) for r in data]
        return rows, _columns(rows)
    if text and not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        warnings.warn(f"{path}: its last row was torn ({text[cut:][:40]!r}: the study was killed while writing it); "
                      "it is dropped and its point recomputed", UserWarning, stacklevel=3)
        text = text[:cut]
    records = list(csv.reader(io.StringIO(text)))
    if not records:
        return [], []
    header = records[0]
    if len(set(header)) != len(header):
        dup = next(c for c in header if header.count(c) > 1)
        raise ModelError(f"{path}: column {dup!r} appears twice in the header; not a sweep table")
    rows = []
    for i, rec in enumerate(records[1:], 2):
        if len(rec) != len(header):
            raise ModelError(f"{path}: line {i} has {len(rec)} field{'s' * (len(rec) != 1)}, the header "
                             f"{len(header)}; the table is damaged (repair or remove that line)")
        rows.append(_gather({k: _csv_value(v, k) for k, v in zip(header, rec)}))
    return rows, header


def _torn_json(path: Path, text: str) -> list:
    """The rows of a JSON table whose last row was torn (one row object per line, as :class:`TableWriter` writes)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() not in ("", "[", "]")]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line.rstrip(",")))
        except json.JSONDecodeError:
            if i != len(lines) - 1:
                raise ModelError(f"cannot read the table {str(path)!r}: row {i + 1} is not JSON; the table is "
                                 "damaged") from None
            warnings.warn(f"{path}: its last row was torn ({line[:40]!r}: the study was killed while writing it); it "
                          "is dropped and its point recomputed", UserWarning, stacklevel=4)
    return rows


def _header_mismatch(study: "Study", header: Sequence[str]) -> str | None:
    """How a table's columns differ from the study's (``None`` when it is a sweep table of the study)."""
    def base(c):
        b, _, idx = c.rpartition("_")
        return b if b in VECTOR_COLUMNS and idx.isdigit() else c

    have = {base(c) for c in header}
    want = set(study.columns)
    if have == want:
        return None
    missing = [c for c in study.columns if c not in have]
    extra = [c for c in dict.fromkeys(base(c) for c in header) if c not in want]
    bits = []
    if missing:
        bits.append("missing columns: " + ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else ""))
    if extra:
        bits.append("foreign columns: " + ", ".join(extra[:6]) + (" ..." if len(extra) > 6 else ""))
    return "; ".join(bits)


def _pandas(why: str):
    try:
        import pandas as pd
    except ImportError:
        raise ModelError(f"{why} needs pandas and pyarrow (pip install pandas pyarrow)") from None
    return pd


def write_table(path: str | Path, rows: list[dict], columns: Sequence[str] = ()) -> None:
    """Write ``rows`` to ``path`` (``.csv``, ``.json`` or ``.parquet``), atomically.

    ``columns`` come first, in order; vector values become component columns in CSV
    and Parquet.
    """
    path = Path(path)
    kind = _format(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        _write_table(path, tmp, kind, rows, columns)
    except OSError as exc:
        raise file_error(exc, "write", path) from None


def _write_table(path: Path, tmp: Path, kind: str, rows: list[dict], columns: Sequence[str]) -> None:
    if kind == ".json":
        with open(tmp, "w") as fh:
            fh.write(_json_array(rows, columns))
    elif kind == ".csv":
        flat = [_flat(r) for r in rows]
        cols = _columns(flat, columns)
        with open(tmp, "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(cols)
            for r in flat:
                w.writerow([_csv_text(r.get(c)) for c in cols])
    else:
        pd = _pandas("writing a .parquet table")
        flat = [_flat(r) for r in rows]
        cols = _columns(flat, columns)
        data = {}
        for c in cols:
            values = [r.get(c) for r in flat]
            types = {type(v) for v in values if v is not None}
            if str in types and len(types) > 1:  # one type per Parquet column: mixed cells as text
                values = [None if v is None else _csv_text(v) for v in values]
            data[c] = values
        pd.DataFrame(data, columns=cols).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _json_row(row: dict, columns: Sequence[str]) -> str:
    ordered = {c: row[c] for c in columns if c in row}
    ordered.update({k: v for k, v in row.items() if k not in ordered})
    return json.dumps({k: _json_ready(v) for k, v in ordered.items()})


def _json_array(rows: list[dict], columns: Sequence[str]) -> str:
    if not rows:
        return "[\n]\n"
    return "[\n" + ",\n".join(_json_row(r, columns) for r in rows) + "\n]\n"


class TableWriter:
    """Streams finished rows to ``path`` so that an interrupted study loses nothing.

    CSV rows are appended (the file is rewritten only when a new column appears, e.g.
    the components of a vector measure); JSON rows are inserted before the closing
    bracket, so the file is a valid JSON array after every row; a Parquet file is
    rewritten after every batch. :meth:`finish` writes the table in its final order.
    """

    def __init__(self, path: str | Path, columns: Sequence[str], kept: list[dict]):
        self.path = Path(path)
        self.kind = _format(self.path)
        self.columns = list(columns)
        self.rows = list(kept)
        self._csv_cols: list[str] | None = None
        self._rewrite()

    def _rewrite(self) -> None:
        write_table(self.path, self.rows, self.columns)
        if self.kind == ".csv":
            self._csv_cols = _columns([_flat(r) for r in self.rows], self.columns)

    def add(self, rows: list[dict]) -> None:
        """Append the rows of one finished batch to the file."""
        try:
            self._add(rows)
        except OSError as exc:
            raise file_error(exc, "write", self.path) from None

    def _add(self, rows: list[dict]) -> None:
        self.rows.extend(rows)
        if self.kind == ".csv":
            flat = [_flat(r) for r in rows]
            if any(k not in self._csv_cols for r in flat for k in r):
                self._rewrite()
                return
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            for r in flat:
                w.writerow([_csv_text(r.get(c)) for c in self._csv_cols])
            with open(self.path, "a", newline="") as fh:
                fh.write(buf.getvalue())
                fh.flush()
        elif self.kind == ".json":
            with open(self.path, "r+b") as fh:
                fh.seek(0, os.SEEK_END)
                end = fh.tell()
                empty = end <= len(b"[\n]\n")
                fh.seek(len(b"[\n") if empty else end - len(b"\n]\n"))
                text = ",\n".join(_json_row(r, self.columns) for r in rows)
                fh.write(((text if empty else ",\n" + text) + "\n]\n").encode())
                fh.truncate()
                fh.flush()
        else:
            self._rewrite()

    def finish(self, rows: list[dict]) -> None:
        """Write ``rows`` (the final table, in order) in place of the streamed file."""
        self.rows = list(rows)
        self._rewrite()


# ------------------------------------------------------------------------ sweep
def sweep(
    model: str,
    fixed: dict | None = None,
    over: dict | Sequence | None = None,
    *,
    measure: str | None = None,
    method: str = "auto",
    tol: float = 1e-9,
    backend: str = "processes",
    scheduler: Any = None,
    workers: int | None = None,
    out: str | Path | None = None,
    force: bool = False,
    options: dict | None = None,
    progress: Callable[[dict], None] | None = None,
    as_frame: bool | None = None,
    warm_start: bool = False,
    **solve_options: Any,
):
    """Solve a model over a grid of parameters and return the tidy table (module docstring).

    Parameters
    ----------
    model : str
        A model name from the catalogue (``exactq models``).
    fixed : dict, optional
        The parameters that do not vary, as for :func:`exactq.solve` (strings allowed:
        ``{"service_rates": "1,2"}``).
    over : dict
        ``{name: spec}`` in order: the swept parameters, each a grid specification
        (``"0.5:0.9:5"``, ``"1e-3:1e-9:4:log"``, ``"1,1|1,2"``) or a list of values. The
        grid is their cartesian product, the last one varying fastest. ``method`` and
        ``measure`` may be swept too.
    measure, method, tol, options
        As for :func:`exactq.solve`.
    backend : {"processes", "serial", "dask"}
        Where the points are solved (module docstring).
    scheduler : str or dask.distributed.Client, optional
        For ``backend="dask"``: the scheduler's address (``tcp://HOST:PORT``) or a
        client; ``None`` starts a ``LocalCluster`` for the duration of the sweep.
    workers : int, optional
        Worker processes of the ``processes`` backend, or of the ``LocalCluster``
        (default: every core).
    out : str or Path, optional
        The table's file (``.csv``, ``.json``, ``.parquet``), written as points finish,
        and read first to skip the points it already holds with status ``ok``.
    force : bool
        Recompute the points already in ``out``.
    progress : callable, optional
        Called after each finished batch with ``{"done", "total", "failed",
        "skipped", "elapsed", "rows"}`` (the rows just finished): for a progress bar
        (:func:`exactq.progress.sweep_bar`).
    as_frame : bool, optional
        Return a pandas ``DataFrame`` (the default when pandas is installed) or a list
        of dicts (``False``).
    warm_start : bool
        Start each adaptive truncation at the last but one level of the previous point
        solved before it by the same backend task (:func:`exactq.backends.run_batch`; the serial backend
        carries it over every point). The stopping rule is unchanged,
        so every value meets ``tol``, but it then depends (within ``tol``) on the order
        in which the points were solved: off by default, so that every backend gives
        bit-identical rows. Measured on 100 points of ``jsq service_rates=1,2
        --method ctmc`` over increasing loads: 1.27-1.42x faster, values within 5e-11
        of the cold ones (``bench/sweep.py``).
    **solve_options
        Other keywords of :func:`exactq.solve` for every point (``time_limit``,
        ``strict``, ``truncation``, ``certify``, ``verify``, ``lump``).

    Returns
    -------
    pandas.DataFrame or list of dict
        One row per point of the grid, in grid order (module docstring for the
        columns).

    Raises
    ------
    ModelError
        An invalid study (unknown model, parameter, measure or method, a malformed
        grid, a bad ``out``). Invalid or unstable *points* are rows with
        ``status="error"``.

    Examples
    --------
    The M/M/1 queue holds ``rho / (1 - rho)`` jobs on average:

    >>> rows = sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.25:0.75:3"},
    ...              measure="mean_number", backend="serial", as_frame=False)
    >>> [(r["arrival_rate"], r["status"]) for r in rows]
    [(0.25, 'ok'), (0.5, 'ok'), (0.75, 'ok')]
    >>> all(abs(r["value"] - r["arrival_rate"] / (1 - r["arrival_rate"])) < 1e-12 for r in rows)
    True

    An unstable point is a row, not an error:

    >>> rows = sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5|1.5"}, backend="serial", as_frame=False)
    >>> [r["status"] for r in rows]
    ['ok', 'error']
    """
    from .backends import run_tasks

    study = Study(model, fixed, over if over is not None else {}, measure=measure, method=method, tol=tol,
                  options=options, solve_options=solve_options)
    if backend not in ("serial", "processes", "dask"):
        raise ModelError(f"backend must be one of serial, processes, dask; got {backend!r}")
    if scheduler is not None and backend != "dask":
        raise ModelError(f"scheduler applies to the dask backend; backend {backend!r} was chosen")
    workers = check_workers(workers)
    study.precheck(study.points())
    done: dict = {}
    foreign: list[dict] = []
    writer = None
    if out is not None:
        out = Path(out)
        _format(out)
        _check_writable(out)
        if out.exists() and out.stat().st_size > 0:
            rows_in_file, header = _read_for_resume(out)
            mismatch = _header_mismatch(study, header)
            if mismatch and not force:
                raise ModelError(f"out {str(out)!r} is not a sweep table of this study ({mismatch}); choose another "
                                 "file, or force (--force) to overwrite it")
            if mismatch:
                warnings.warn(f"out {str(out)!r} is not a sweep table of this study ({mismatch}); it is overwritten "
                              "(force)", UserWarning, stacklevel=2)
                rows_in_file = []
            for row in rows_in_file:
                done.setdefault(study.key(row), []).append(row)
    grid_keys = [study.task_key(t) for t in study.points()]
    grid_set = set(grid_keys)
    kept: dict = {}
    for key, rows in done.items():
        if key not in grid_set:
            foreign.extend(rows)
        elif not force:
            ok = [r for r in rows if r.get("status") == "ok"]
            if ok:
                kept[key] = ok[-1]
    todo: list[int] = []
    tasks: list[dict] = []  # only the points still to solve are built as tasks
    for i, (key, task) in enumerate(zip(grid_keys, study.points())):
        if key not in kept:
            if warm_start:
                task["warm"] = True
            todo.append(i)
            tasks.append(task)
    if out is not None:
        writer = TableWriter(out, study.columns, [kept[k] for k in grid_keys if k in kept] + foreign)
    results: dict[int, dict] = {}
    t0 = time.perf_counter()
    counts = {"done": 0, "failed": 0, "weight_done": 0.0}
    weights = None
    if progress is not None and tasks:  # the ETA weighs the points by their predicted cost
        from .backends import task_weights

        weights = task_weights(tasks)
    weight_of = weights or [1.0] * len(tasks)
    position = {i: j for j, i in enumerate(todo)}

    def report(rows: list[dict]) -> None:
        if progress is not None:
            progress({"done": counts["done"], "total": len(todo), "failed": counts["failed"],
                      "skipped": len(kept), "elapsed": time.perf_counter() - t0, "rows": rows,
                      "weight_done": counts["weight_done"], "weight_total": float(sum(weight_of))})

    def finished(indices: list[int], rows: list[dict]) -> None:
        for i, row in zip(indices, rows):
            results[i] = row
            counts["weight_done"] += weight_of[position[i]]
        counts["done"] += len(rows)
        counts["failed"] += sum(r["status"] != "ok" for r in rows)
        if writer is not None:
            writer.add(rows)
        report(rows)

    report([])  # the bar shows at once, before the first batch ends
    try:
        run_tasks(tasks, backend=backend, scheduler=scheduler, workers=workers, weights=weights,
                  on_done=lambda idx, rows: finished([todo[j] for j in idx], rows))
    finally:
        if writer is not None:
            table = [results.get(i) or kept.get(k) for i, k in enumerate(grid_keys)]
            writer.finish([r for r in table if r is not None] + foreign)
    rows = [results[i] if i in results else kept[k] for i, k in enumerate(grid_keys)]
    rows = [{c: r.get(c) for c in _columns([r], study.columns)} for r in rows]
    if as_frame is None:
        try:
            import pandas  # noqa: F401
        except ImportError:
            as_frame = False
        else:
            as_frame = True
    if as_frame:
        pd = _pandas("as_frame=True")
        return pd.DataFrame(rows, columns=_columns(rows, study.columns))
    return rows
