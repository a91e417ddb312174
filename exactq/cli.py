"""The ``exactq`` command line.

::

    exactq models [--json]
    exactq solve MODEL key=value ... [--measure M] [--method NAME] [--tol X]
                 [--truncation N] [--time-limit S] [--verify] [--certify] [--strict] [--no-lump] [--json]
                 [--progress | --no-progress]
    exactq check MODEL key=value ... 'QUERY' [--tol X] [--truncation N] [--time-limit S] [--json]
    exactq models FILE.sm [--const N=3] [--json]
    exactq solve FILE.sm [--const N=3,...] [--measure reward:NAME|label:NAME] [--method M] [--option solver=S] [...]
    exactq check FILE.sm ['PROPERTY' ...] [--props FILE.csl] [--prop NAME|N ...] [--const N=3,T=0:10:100]
                 [--method M] [--option solver=S] [--strict] [--json]
    exactq export MODEL key=value ... --format prism-explicit|mtx [--out PREFIX] [--truncation N]
    exactq check PREFIX.tra|PREFIX.mtx 'PROPERTY' ...    (an export read back)
    exactq --version
    exactq reproduce NAME [--out DIR] [--full] [--progress | --no-progress]
    exactq sweep MODEL key=value ... --over NAME=SPEC [--over ...] --out results.csv|.json|.parquet
                 [--measure M] [--method NAME] [--tol X] [--backend processes|serial|dask]
                 [--scheduler tcp://HOST:PORT] [--workers N] [--force] [--warm-start]
    exactq plot results.csv --x NAME [--y value] [--hue NAME] [--logx] [--logy] --out fig.png|.pdf|.svg

Lists are comma separated (``service_rates=1,2``). Every user error ends with one
line on stderr (``exactq: error: ...``) and exit status 2; warnings are printed on
stderr as ``exactq: warning: ...`` and, with ``--json``, also listed under
``"warnings"`` (stdout carries only the JSON).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_INTERNAL = 3
_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise _UsageError(message)


class _ShowVersion(Exception):
    pass


class _VersionAction(argparse.Action):
    """``exactq --version``: handled by :func:`main` (stdout, exit 0), before the command is required."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise _ShowVersion()


def version() -> str:
    """The installed distribution's version (``importlib.metadata``), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    from . import __version__

    try:
        return dist_version("exactq")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return __version__


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="exactq", description="Exact performance values of queueing and load-balancing models.")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--version", action=_VersionAction, help="print exactq's version and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    m = sub.add_parser("models", help="list models with their parameters, measures and methods (or describe a PRISM "
                                      "file: its constants, variables, labels, rewards and, with --const, its size)")
    m.add_argument("name", nargs="?", help="show one model only, or a PRISM file (FILE.sm)")
    m.add_argument("--const", action="append", metavar="N=3,T=10",
                   help="values of a PRISM file's undefined constants (then the states and transitions are counted)")
    m.add_argument("--json", action="store_true")

    s = sub.add_parser("solve", help="compute a measure of a model")
    s.add_argument("model")
    s.add_argument("params", nargs="*", metavar="key=value")
    s.add_argument("--measure")
    s.add_argument("--method", default="auto")
    s.add_argument("--tol", type=float, default=1e-9)
    s.add_argument("--truncation", type=int)
    s.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="stop an adaptive truncation after this long and return the last value with a warning")
    s.add_argument("--verify", action="store_true", help="re-solve at 50 digits with mpmath")
    s.add_argument("--certify", action="store_true",
                   help="lower/upper that provably contain the finite chain's exact value (rounding included)")
    s.add_argument("--strict", action="store_true", help="turn accuracy warnings into errors")
    s.add_argument("--no-lump", action="store_true", help="solve the full chain, not the symmetry-lumped one")
    s.add_argument("--option", action="append", default=[], metavar="key=value",
                   help="a method option (repeatable), e.g. --option solver=SCS for the convex method")
    s.add_argument("--const", action="append", metavar="N=3,T=10",
                   help="values of the undefined constants of a PRISM file (FILE.sm)")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="truncation and certificate progress on stderr; default: on a terminal, not with --json")
    s.add_argument("--json", action="store_true")

    c = sub.add_parser("check", help="evaluate a CSL-style query on a model's CTMC, or PRISM properties on a "
                                     "PRISM file (FILE.sm, FILE.prism, FILE.pm) or an export (FILE.tra, FILE.mtx)")
    c.add_argument("model")
    c.add_argument("args", nargs="*", metavar="key=value ... QUERY")
    c.add_argument("--tol", type=float, default=1e-9)
    c.add_argument("--truncation", type=int)
    c.add_argument("--time-limit", type=float, metavar="SECONDS")
    c.add_argument("--strict", action="store_true")
    c.add_argument("--const", action="append", metavar="N=3,T=0:10:100",
                   help="values of the undefined constants of a PRISM model, of its properties and of constants "
                        "only a property uses; lo:step:hi or lo:hi is a range (one answer per value, as PRISM's "
                        "-const)")
    c.add_argument("--props", metavar="FILE.csl", help="a PRISM properties file (one property per line)")
    c.add_argument("--prop", action="append", default=[], metavar="NAME|N",
                   help="check only this property of the file: its name, or its number from 1 (repeatable)")
    c.add_argument("--method", default="auto", help="on a PRISM file: auto, or the chain's method (ctmc, dtmc)")
    c.add_argument("--option", action="append", default=[], metavar="key=value",
                   help="on a PRISM file: solver=NAME, a registered solver: stationary (steady-state "
                        "properties) or linear (reachability, expected time and reward)")
    c.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="build and check progress on stderr; default: on a terminal, not with --json")
    c.add_argument("--json", action="store_true")

    e = sub.add_parser("export", help="write a model's chain as PRISM explicit files (.tra/.sta/.lab, rewards "
                                      ".srew/.trew) or Matrix Market (.mtx with the same .sta/.lab/.srew); "
                                      "exactq check PREFIX.tra|PREFIX.mtx reads them back")
    e.add_argument("model")
    e.add_argument("params", nargs="*", metavar="key=value")
    e.add_argument("--format", required=True, choices=("prism-explicit", "mtx"))
    e.add_argument("--out", metavar="PREFIX", help="path without extension (default: the model's name)")
    e.add_argument("--truncation", type=int, help="the truncation level of an infinite model")
    e.add_argument("--const", action="append", metavar="N=3,T=10", help="constants of a PRISM model")
    e.add_argument("--strict", action="store_true")
    e.add_argument("--json", action="store_true")

    r = sub.add_parser("reproduce", help="re-create a seed paper's tables and figures")
    r.add_argument("name", nargs="?", help="omit to list the reproductions")
    r.add_argument("--out", help="directory for JSON tables and figures")
    r.add_argument("--full", action="store_true",
                   help="paper-scale run (tighter tolerances, larger chains; minutes)")
    r.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a status line on stderr (table, point, elapsed, time left); default: on a terminal only")

    w = sub.add_parser("sweep", help="solve a model over a grid of parameters into a table (exit 1 if a point failed)")
    w.add_argument("model")
    w.add_argument("params", nargs="*", metavar="key=value", help="the fixed parameters")
    w.add_argument("--over", action="append", default=[], metavar="NAME=SPEC",
                   help="a swept parameter: start:stop:num, start:stop:num:log or a|b|c (repeatable: the grid)")
    w.add_argument("--measure")
    w.add_argument("--method", default="auto")
    w.add_argument("--tol", type=float, default=1e-9)
    w.add_argument("--out", required=True, help="the table: results.csv, .json or .parquet (resumed if it exists)")
    w.add_argument("--backend", choices=("processes", "serial", "dask"), default="processes")
    w.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (backend dask; default: a LocalCluster)")
    w.add_argument("--workers", type=int, help="worker processes (default: every core)")
    w.add_argument("--force", action="store_true", help="recompute the points already in --out (and overwrite an "
                                                          "--out that is not a table of this study)")
    w.add_argument("--warm-start", action="store_true",
                   help="start each adaptive truncation from the previous point's (faster; values then depend "
                        "on the order of points, within tol)")
    w.add_argument("--truncation", type=int)
    w.add_argument("--time-limit", type=float, metavar="SECONDS", help="per point, as for solve")
    w.add_argument("--strict", action="store_true")
    w.add_argument("--option", action="append", default=[], metavar="key=value", help="a method option")
    w.add_argument("--quiet", action="store_true", help="no progress bar")

    pl = sub.add_parser("plot", help="draw a sweep table (the plot extra): lines, with lower/upper as bands")
    pl.add_argument("table", help="a table written by exactq sweep (.csv, .json, .parquet)")
    pl.add_argument("--x", required=True, help="the column on the horizontal axis")
    pl.add_argument("--y", default="value", help="the column on the vertical axis (default value)")
    pl.add_argument("--hue", help="one line per value of this column")
    pl.add_argument("--logx", action="store_true")
    pl.add_argument("--logy", action="store_true")
    pl.add_argument("--title")
    pl.add_argument("--out", required=True, help="fig.png, .pdf or .svg")
    return p


def _cmd_sweep(args) -> int:
    import time

    from .progress import sweep_bar
    from .sweep import sweep

    if not args.over:
        raise _UsageError("sweep needs at least one --over NAME=SPEC")
    over = {}
    for item in args.over:
        m = _KV.match(item)
        if not m:
            raise _UsageError(f"--over must look like NAME=SPEC; got {item!r}")
        if m.group(1) in over:
            raise _UsageError(f"--over {m.group(1)} given twice")
        over[m.group(1)] = m.group(2)
    solve_options = {k: v for k, v in (("truncation", args.truncation), ("time_limit", args.time_limit))
                     if v is not None}  # 0 is a value (refused by the one validation), not "not given"
    if args.strict:
        solve_options["strict"] = True
    bar = None if args.quiet else sweep_bar(stream=sys.stderr)
    seen: dict = {}

    def progress(event):
        seen.update(event)
        if bar is not None:
            bar(event)

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = sweep(args.model, _parse_kv(args.params), over, measure=args.measure, method=args.method,
                         tol=args.tol, backend=args.backend, scheduler=args.scheduler, workers=args.workers,
                         out=args.out, force=args.force, progress=progress, as_frame=False,
                         warm_start=args.warm_start,
                         options={k: _option_value(v) for k, v in _parse_kv(args.option).items()}, **solve_options)
    finally:
        if bar is not None:
            bar.close()
        for w in caught if "caught" in locals() else ():  # the study's own warnings (a torn row dropped, ...)
            print(f"exactq: warning: {_one_line(str(w.message))}", file=sys.stderr)
    failed = [r for r in rows if r["status"] != "ok"]
    swept = [k for k in over if k in rows[0]] if rows else []
    for r in failed[:5]:
        where = " ".join(f"{k}={_fmt_value(r[k])}" for k in swept) or "a point"
        print(f"exactq: error at {where}: {r['message']}", file=sys.stderr)
    if len(failed) > 5:
        print(f"exactq: ... and {len(failed) - 5} more failed points (see the message column)", file=sys.stderr)
    resumed = seen.get("skipped", len(rows))
    print(f"{args.model}: {len(rows)} points ({resumed} already in {args.out}), {len(rows) - len(failed)} ok, "
          f"{len(failed)} failed, {time.perf_counter() - t0:.3g} s -> {args.out}")
    return 1 if failed else 0


def _cmd_plot(args) -> None:
    from .plotting import plot_file

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = plot_file(args.table, args.out, x=args.x, y=args.y, hue=args.hue, logx=args.logx, logy=args.logy,
                         title=args.title)
    for w in caught:
        if issubclass(w.category, UserWarning) or issubclass(w.category, RuntimeWarning):
            print(f"exactq: warning: {_one_line(str(w.message))}", file=sys.stderr)
    print(path)


def _parse_kv(items) -> dict:
    out = {}
    for item in items:
        m = _KV.match(item)
        if not m:
            raise _UsageError(f"parameters must look like key=value; got {item!r}")
        key, value = m.groups()
        if key in out:
            raise _UsageError(f"parameter {key} given twice")
        out[key] = value
    return out


def _fmt_value(v) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.12g}"
    return str(v)


def _params_json(model) -> dict:
    from .result import _plain

    out = {}
    for k, v in model.params().items():
        out[k] = "inf" if isinstance(v, float) and v == float("inf") else _plain(v)
    return out


def _emit(args, model, result, caught) -> None:
    result.require_finite(f"{model.name} {result.measure}")  # a NaN or an unexplained inf is never printed
    warn_lines = [str(w.message) for w in caught]
    if args.json:
        d = result.to_dict()
        payload = {
            "model": model.name,
            "params": _params_json(model),
            "measure": d.pop("measure"),
            "method": d.pop("method"),
            "value": d.pop("value"),
            "lower": d.pop("lower"),
            "upper": d.pop("upper"),
            "n_states": d.pop("n_states"),
            "seconds": d.pop("seconds"),
        }
        payload.update(d)
        payload["warnings"] = warn_lines
        for line in warn_lines:  # stderr too: a script reading stdout's JSON is unaffected
            print(f"exactq: warning: {line}", file=sys.stderr)
        print(json.dumps(payload, default=str))
    else:
        for line in warn_lines:
            print(f"exactq: warning: {line}", file=sys.stderr)
        bits = [f"method {result.method}"]
        if result.lower is not None or result.upper is not None:
            kind = "certified bounds" if "certificate" in result.info else "bounds"
            bits.append(f"{kind} [{float(result.lower)!r}, {float(result.upper)!r}]" if kind.startswith("certified") else
                        f"{kind} [{_fmt_value(result.lower)}, {_fmt_value(result.upper)}]")
        if result.error_estimate is not None:
            bits.append(f"error estimate {result.error_estimate:.2e}")
        if result.n_states is not None:
            bits.append(f"{result.n_states} states")
        bits.append(f"{result.seconds:.3g} s")
        print(f"{model.name} {result.measure} = {_fmt_value(result.value)}  ({', '.join(bits)})")
        verify = result.info.get("verify")
        if verify and "abs_diff" in verify:
            print(f"verify: 50-digit re-solve agrees to {verify['abs_diff']:.2e} "
                  f"({'ok' if verify['agree'] else 'DISAGREES'})")


def _cmd_models(args) -> None:
    from .catalogue import describe_models

    if args.name and _is_prism(args.name):
        return _cmd_models_prism(args)
    if args.const:
        raise _UsageError(f"--const applies to PRISM files; {args.name or 'the catalogue'!r} is not one")
    models = describe_models()
    elsewhere = _scopes_elsewhere(models)
    if args.name:
        models = [m for m in models if m["name"] == args.name]
        if not models:
            from .catalogue import get_model

            get_model(args.name)  # raises the one-line error
    from .catalogue import LOAD_ERRORS

    if args.json:
        print(json.dumps(models, indent=1))
        return
    for mod, err in LOAD_ERRORS.items():
        print(f"unavailable: {mod} could not be loaded ({err})")
    for m in models:
        print(f"{m['name']}: {m['summary']}")
        if m["reference"]:
            print(f"  reference: {m['reference']}")
        print("  parameters:")
        for p in m["parameters"]:
            req = "required" if p["required"] else f"default {_fmt_value(p['default'])}"
            rule = f"; {p['rule']}" if p["rule"] else ""
            scope = f"; {p['scope_doc']}" if p.get("scope_doc") else ""
            other = elsewhere.get((m["name"], p["name"]), "")
            print(f"    {p['name']} ({p['kind']}, {req}{rule}{scope}{other}): {p['doc']}")
            if p.get("aliases"):
                print("      also as " + ", ".join(f"{a['name']} ({a['doc']})" for a in p["aliases"]))
        print("  measures:")
        for k, v in m["measures"].items():
            star = " (default)" if k == m["default_measure"] else ""
            print(f"    {k}{star}: {v}")
        print(f"  methods: {', '.join(m['methods'])}")
        if m.get("method_options"):
            opts = "; ".join(f"{k}: {', '.join(v)}" for k, v in m["method_options"].items())
            print(f"  method options (--option key=value): {opts}")
        print()


def _scopes_elsewhere(models: list) -> dict:
    """``(model, parameter) -> " (power-of-d, speed-aware: per server)"`` where the name has another scope elsewhere."""
    by_name: dict = {}
    for m in models:
        for p in m["parameters"]:
            if p.get("scope"):
                by_name.setdefault(p["name"], {}).setdefault(p["scope"], []).append(m["name"])
    out = {}
    for name, scopes in by_name.items():
        for scope, owners in scopes.items():
            others = [f"{', '.join(ms)}: {s.replace('-', ' ')}" for s, ms in scopes.items() if s != scope]
            for owner in owners:
                if others:
                    out[(owner, name)] = f" ({'; '.join(others)})"
    return out


def _cmd_models_prism(args) -> None:
    """``exactq models FILE.sm [--const ...]``: what the file declares and, with every constant given, its size."""
    from .prism.models import describe_prism

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = describe_prism(args.name, args.const, strict=False)
    lines = [str(w.message) for w in caught]
    for line in lines:
        print(f"exactq: warning: {line}", file=sys.stderr)
    if args.json:
        d["warnings"] = lines
        print(json.dumps(d, indent=1, default=str))
        return
    print(f"{d['file']}: PRISM {d['type']} model")
    undefined = [c for c in d["constants"] if c["undefined"]]
    print("  undefined constants: " + (", ".join(f"{c['name']} ({c['type']})" + (f" = {c['value']}" if c["value"]
                                                                                   is not None else "")
                                                 for c in undefined) or "none"))
    defined = [c for c in d["constants"] if not c["undefined"]]
    if defined:
        shown = [f"{c['name']} ({c['type']}) = {c['value'] if c['value'] is not None else c['definition']}"
                 for c in defined]
        print("  constants: " + ", ".join(shown))
    print("  variables:")
    for v in d["variables"]:
        where = "global" if v["module"] is None else f"module {v['module']}"
        print(f"    {v['name']} : {v['range']}  (init {v['init']}, {where})")
    print("  labels: " + ", ".join(f'"{k}"' for k in d["labels"]))
    print("  reward structures: " + (", ".join(f'"{r["name"]}"' if r["name"] else f"#{k + 1} (unnamed)"
                                               for k, r in enumerate(d["rewards"])) or "none"))
    if d.get("n_states") is not None:
        print(f"  {d['n_states']} states, {d['n_transitions']} transitions"
              + (f", {d['n_deadlocks']} deadlocks fixed" if d.get("n_deadlocks") else "")
              + f" (built in {d['build_seconds']:.3g} s)")
    elif undefined:
        print("  give the undefined constants with --const to count the states and transitions")


def _prism_constants(args) -> dict:
    """The constants of a PRISM file from --const, and from the deprecated CONST=value arguments (with a warning)."""
    from .prism.models import parse_constants

    given = parse_constants(args.const)
    params = getattr(args, "params", None) or []
    if params:
        old = _parse_kv(params)
        warnings.warn(f"'exactq solve FILE.sm {params[0]}' is deprecated: give a PRISM file's constants with --const "
                      f"{','.join(params)}", DeprecationWarning, stacklevel=2)
        for k, v in old.items():
            if k in given:
                raise _UsageError(f"constant {k} is given twice (as {k}={v} and with --const)")
            given[k] = v
    return given


def _cmd_solve(args) -> None:
    from .api import model as build, solve

    early: list = []
    if _is_prism(args.model) and args.model.endswith((".tra", ".mtx")):  # exactq export's files
        from .prism import load_explicit

        if args.params or args.const:
            given = args.params[0] if args.params else "--const"
            raise _UsageError(f"an explicit chain ({args.model}) has no parameters or constants; got {given!r}")
        model = load_explicit(args.model)
    elif _is_prism(args.model):  # a PRISM file: --const gives its undefined constants
        from .prism import load_prism

        with warnings.catch_warnings(record=True) as early:
            warnings.simplefilter("always")
            model = load_prism(args.model, _prism_constants(args), strict=args.strict)
    else:
        if args.const:
            raise _UsageError(f"--const applies to PRISM files; {args.model!r} is a model name")
        model = build(args.model, **_parse_kv(args.params))
    line = _progress_line(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for w in early:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        try:
            result = solve(model, args.measure, method=args.method, tol=args.tol, truncation=args.truncation,
                           verify=args.verify, strict=args.strict, lump=not args.no_lump,
                           time_limit=args.time_limit, certify=args.certify, progress=line,
                           options={k: _option_value(v) for k, v in _parse_kv(args.option).items()})
        finally:
            if line is not None:
                line.close()
    _emit(args, model, result, caught)


def _progress_line(args):
    """The truncation progress line on a terminal (not under --json), else None; ``--progress`` forces it."""
    from .progress import StatusLine, TruncationLine, is_terminal

    wanted = getattr(args, "progress", None)
    if wanted is False:
        return None
    if wanted is True:
        return TruncationLine(sys.stderr) if is_terminal(sys.stderr) else StatusLine(sys.stderr, live=False)
    return TruncationLine(sys.stderr) if not args.json and is_terminal(sys.stderr) else None


def _option_value(text: str):
    """``true``/``false`` -> bool, numbers -> int/float, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _cmd_check(args) -> int | None:
    from .api import check, model as build

    if _is_prism(args.model):
        return _cmd_check_prism(args)
    if args.const or args.props or args.prop:
        raise _UsageError(f"--const, --props and --prop apply to PRISM files; {args.model!r} is a model name")
    if args.method != "auto" or args.option:
        raise _UsageError(f"--method and --option apply to PRISM files in 'check'; {args.model!r} is a model name "
                          "(its queries are checked on its CTMC)")
    queries = [a for a in args.args if _looks_like_query(a)]
    kv = [a for a in args.args if not _looks_like_query(a)]
    if len(queries) != 1:
        raise _UsageError("give one query, e.g. 'S=? [ n > 2 ]', with the key=value parameters (in any order)"
                          if not queries else f"give one query per check; got {len(queries)}: "
                          + "; ".join(repr(q) for q in queries[:3]))
    query = queries[0]
    model = build(args.model, **_parse_kv(kv))
    line = _progress_line(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = check(model, query, tol=args.tol, truncation=args.truncation, strict=args.strict,
                           time_limit=args.time_limit, progress=line)
        finally:
            if line is not None:
                line.close()
    _emit(args, model, result, caught)


def _looks_like_query(text: str) -> bool:
    """A query, not a ``key=value`` parameter: it has ``=?``, a bracket (thresholds, paths) or is a filter.

    >>> [_looks_like_query(s) for s in ("S=? [ n = 3 ]", "P>=0.9 [ F q1 = 5 ]", "filter(max, S=? [ a ])", "K=3")]
    [True, True, True, False]
    """
    text = text.strip()
    return "=?" in text or "[" in text or text.startswith("filter(") or not _KV.match(text)


def _is_prism(name: str) -> bool:
    import os

    from .catalogue import is_builtin_model

    if is_builtin_model(name) and not os.path.isfile(name):
        return False  # a built-in model's name (never a PRISM suffix): no need to load the PRISM front end
    from .prism.models import is_prism_path

    return is_prism_path(name)


def _load_file_model(args, constants=None):
    """The model of a PRISM file (``--const`` or ``constants``) or of PRISM's explicit files (``.tra``)."""
    from .prism import load_explicit, load_prism

    if args.model.endswith((".tra", ".mtx")):
        if args.const:
            raise _UsageError("--const applies to PRISM model files, not to explicit .tra/.mtx files")
        return load_explicit(args.model)
    return load_prism(args.model, args.const if constants is None else constants, strict=args.strict)


def _prism_solver(args) -> str:
    """The solver for a PRISM file's properties (stationary or linear), from --method and --option solver=NAME."""
    options = _parse_kv(args.option)
    unknown = [k for k in options if k != "solver"]
    if unknown:
        raise _UsageError(f"--option {unknown[0]}: 'check' on a PRISM file takes --option solver=NAME (a "
                          "stationary or linear solver)")
    if args.method not in ("auto", "ctmc", "dtmc"):
        raise _UsageError(f"--method must be auto, ctmc or dtmc for a PRISM file (the chain's own method); got "
                          f"{args.method!r}; a solver is chosen with --option solver=NAME")
    return str(options.get("solver", "auto"))


def _cmd_check_prism(args) -> int:
    """``exactq check FILE.sm 'PROPERTY' ... [--props FILE] [--prop NAME|N] [--const ...]``: one answer per property.

    Every property is parsed (and type-checked against the model's declarations)
    before the model is built; each is then answered on its own, and one that fails
    gives its one-line error without stopping the others (exit status 2 if any
    failed). Ranges in --const (``T=0:10:100``) answer one result per combination,
    the model rebuilt for each value of a model constant.
    """
    from .prism.lexer import read_source
    from .prism.models import constant_ranges
    from .prism.properties import property_context
    from .prism.syntax import parse_model_text

    kv = [a for a in args.args if _KV.match(a) and "[" not in a]
    if kv:
        raise _UsageError(f"give the constants of a PRISM file with --const; got {kv[0]!r}")
    if args.truncation is not None:
        raise _UsageError("--truncation does not apply to a PRISM file (its chain is finite)")
    solver = _prism_solver(args)
    explicit = args.model.endswith((".tra", ".mtx"))  # exactq export's files
    if not args.args and not args.props:
        raise _UsageError("give a PRISM property ('P=? [ F \"done\" ]') or --props FILE")
    with warnings.catch_warnings(record=True) as parse_caught:
        warnings.simplefilter("always")
        file_text = read_source(args.props, "properties file") if args.props else None
        props_name = args.props.replace("\\", "/").split("/")[-1] if args.props else "properties"
        ctx = property_context(file_text, props_name, tuple(args.args), tuple(args.prop))
        single, ranges = constant_ranges(args.const)
        if explicit:
            if args.const:
                raise _UsageError("--const applies to PRISM model files, not to explicit .tra/.mtx files")
            mf = None
            model_undefined = set()
        else:
            mf = parse_model_text(read_source(args.model, "PRISM file"), args.model.replace("\\", "/").split("/")[-1])
            model_undefined = {d.name for d in mf.constants}
    early = [str(w.message) for w in parse_caught]
    model_ranges = {k: v for k, v in ranges.items() if k in model_undefined}
    prop_ranges = {k: v for k, v in ranges.items() if k not in model_undefined}
    experiment = bool(ranges)
    many = experiment or len(ctx.items) + len(ctx.declaration_errors) != 1
    entries: list = []  # (kind, payload) in order: ("result", (model, result, constants, warnings)) or ("error", ...)
    failed = False

    def error_entry(model_path, text, name, message, constants, warn):
        nonlocal failed
        failed = True
        entries.append(("error", {"model": model_path, "property": name, "name": name, "measure": text, "error": message,
                                  "constants": constants, "warnings": warn}))
        where = f"{_fmt_constants(constants)}: " if constants else ""
        print(f"exactq: error: {where}{message}", file=sys.stderr)  # with --json too: stdout is the JSON

    for node, where in ctx.declaration_errors:
        error_entry(args.model, node.text, None, _one_line(node.error), {}, [])
    printed_warnings: set = set()

    def show_warnings(lines):
        for line in lines:
            if line not in printed_warnings:
                printed_warnings.add(line)
                print(f"exactq: warning: {line}", file=sys.stderr)

    show_warnings(early)
    job, line = _check_job(args)
    try:
        return _check_prism_points(args, ctx, mf, explicit, single, model_ranges, prop_ranges, experiment, many,
                                   entries, error_entry, show_warnings, early, solver, job)
    finally:
        if job is not None:
            job.close()
            line.close()


def _check_job(args):
    """A progress job for a PRISM check (build, then each property) when a status line is wanted."""
    from .progress import Job, StatusLine, is_terminal

    wanted = getattr(args, "progress", None)
    if wanted is False or (wanted is None and (args.json or not is_terminal(sys.stderr))):
        return None, None
    line = StatusLine(sys.stderr, live=is_terminal(sys.stderr))
    return Job(f"check {args.model.replace(chr(92), '/').split('/')[-1]}", line), line


def _check_prism_points(args, ctx, mf, explicit, single, model_ranges, prop_ranges, experiment, many, entries,
                        error_entry, show_warnings, early, solver, job) -> int:
    """The build(s) and the answers of :func:`_cmd_check_prism` (one build per value of a model range)."""
    import dataclasses

    from .api import check_properties
    from .errors import ExactqError
    from .prism.models import _load, expand_ranges

    n_builds = max(1, len(list(expand_ranges(model_ranges))))
    n_props = len(ctx.items) * max(1, len(list(expand_ranges(prop_ranges))))
    build_stage = props_stage = None
    if job is not None:  # the build weighs as much as the checks together (a guess: both stages show)
        build_stage = job.stage("building the chain", [1.0] * n_builds)
        props_stage = job.stage("checking properties", [1.0 / max(n_props, 1)] * (n_props * n_builds))
    for mc in expand_ranges(model_ranges):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = _load_file_model(args) if explicit else _load(mf, args.model, {**single, **mc},
                                                                      strict=args.strict)
                point0 = {k: v[0] for k, v in prop_ranges.items()}
                compiled = model.compile_properties(ctx, errors="keep", constants=point0)
                if not explicit and any(p.error is None for p in compiled):
                    # build once; its warnings (deadlocks) belong to every answer
                    if build_stage is None:
                        model.built
                    else:
                        for _ in build_stage.each([mc], [_fmt_constants(mc) or args.model]):
                            model.build(progress=build_stage.detail)
                build_error = None
            except ExactqError as exc:
                build_error = _one_line(exc)
        build_warnings = early + [str(w.message) for w in caught]
        show_warnings(build_warnings)
        if build_error is not None:
            if not model_ranges:
                raise _OneLine(build_error)
            for node, where, index in ctx.items:
                error_entry(args.model, node.text, node.name, build_error, dict(mc), build_warnings)
            continue
        for pc in expand_ranges(prop_ranges):
            point = {**mc, **pc}
            items = ctx.items if props_stage is None else props_stage.each(ctx.items, [i[0].text for i in ctx.items])
            for item in items:
                sub = dataclasses.replace(ctx, items=[item], declaration_errors=[])
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        result, = check_properties(model, sub, strict=args.strict, errors="keep", solver=solver,
                                                   constants=dict(pc), check_constants=False)
                    except ExactqError as exc:  # e.g. a --const that nothing uses
                        raise _OneLine(_one_line(exc)) from None
                lines = build_warnings + [str(w.message) for w in caught]
                show_warnings(lines[len(build_warnings):])
                if result.method == "error":
                    error_entry(args.model, result.measure, result.info.get("property_name"), result.info["error"],
                                point if experiment else {}, lines)
                    continue
                if experiment:
                    result.info["constants"] = point
                entries.append(("result", (model, result, point if experiment else {}, lines)))
                if not args.json:
                    _emit_prism_text(result, point if experiment else {})
    if args.json:
        docs = [_prism_json(args, payload) if kind == "result" else payload for kind, payload in entries]
        for d in docs:
            if not d.get("constants"):
                d.pop("constants", None)
        print(json.dumps(docs if many else docs[0], default=str))
    return EXIT_USAGE if any(kind == "error" for kind, _ in entries) else 0


class _OneLine(_UsageError):
    """A whole-run error of a PRISM check, already one line (printed as ``exactq: error: ...``, exit 2)."""


def _one_line(what) -> str:
    """The first line of a message or an exception's message (an exception without one: its type's name)."""
    text = str(what).strip()
    if text:
        return text.splitlines()[0]
    return type(what).__name__ if isinstance(what, BaseException) else ""


def _fmt_constants(constants: dict) -> str:
    return ",".join(f"{k}={_fmt_value(v)}" for k, v in constants.items())


def _fmt_prism_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return _fmt_value(v)


def _prism_json(args, payload) -> dict:
    model, result, constants, warn_lines = payload
    d = result.to_dict()
    info = d.get("info", {})
    out = {
        "model": getattr(model, "path", args.model),
        "params": _params_json(model),
        "property": info.get("property_name"),  # the property's name, as before (the text is "measure")
        "name": info.pop("property_name", None),
        "measure": d.pop("measure"),
        "method": d.pop("method"),
        "value": d.pop("value"),
        "lower": d.pop("lower"),
        "upper": d.pop("upper"),
        "n_states": d.pop("n_states"),
        "n_transitions": info.pop("n_transitions", None),
        "build_seconds": info.pop("build_seconds", None),
        "solve_seconds": info.pop("solve_seconds", None),
        "seconds": d.pop("seconds"),
    }
    if constants:
        out["constants"] = constants
    out.update(d)
    out["warnings"] = warn_lines
    return out


def _emit_prism_text(result, constants: dict) -> None:
    d = result.to_dict()
    info = d.get("info", {})
    bits = [f"method {result.method}"]
    if result.error_estimate is not None:
        bits.append(f"error estimate {result.error_estimate:.2e}")
    if info.get("model") == "mdp" and result.lower is not None and result.upper is not None:
        bits.append(f"bounds [{_fmt_prism_value(result.lower)}, {_fmt_prism_value(result.upper)}], "
                    f"{info.get('solver')}")
    bits.append(f"{result.n_states} states, {info.get('n_transitions')} transitions")
    bits.append(f"build {info.get('build_seconds', 0.0):.3g} s, solve {info.get('solve_seconds', 0.0):.3g} s")
    name = info.get("property_name")
    label = f'"{name}": ' if name else ""
    where = f"{_fmt_constants(constants)}: " if constants else ""
    print(f"{where}{label}{result.measure} = {_fmt_prism_value(result.value)}  ({', '.join(bits)})")
    for key in ("infinite", "filter"):
        if key in info:
            print(f"  {key}: {info[key]}")
    if "states" in info:
        print(f"  states: {' '.join(info['states']) or 'none'}")
    if "printed" in info:
        for state, value in info["printed"]:
            print(f"  {state}: {_fmt_prism_value(value)}")


def _cmd_export(args) -> None:
    """``exactq export MODEL params --format prism-explicit|mtx [--out PREFIX]``."""
    import os

    from .prism.explicit import write_explicit, write_mtx

    bool_vars = ()
    rewards = None
    if _is_prism(args.model):
        if args.params:
            raise _UsageError(f"give the constants of a PRISM file with --const; got {args.params[0]!r}")
        model = _load_file_model(args)
        chain = model.built.chain
        rewards = model.built.rewards  # state and transition rewards of every structure
        info = getattr(model, "info", None)
        if info is not None:
            bool_vars = [v.name for v in info.variables if v.type == "bool"]
        else:  # an explicit chain exported again
            bool_vars = sorted(getattr(model, "bool_vars", ()))
        name = os.path.splitext(os.path.basename(args.model))[0]
    else:
        from .api import model as build

        if args.const:
            raise _UsageError(f"--const applies to PRISM files; {args.model!r} is a model name")
        model = build(args.model, **_parse_kv(args.params))
        factory = "ctmc" if model.offers("ctmc") else ("dtmc" if model.offers("dtmc") else None)
        if factory is None:
            raise _UsageError(f"model {model.name} has no CTMC or DTMC representation to export")
        if model.is_infinite and args.truncation is None:
            raise _UsageError(f"model {model.name} is infinite; give --truncation N (the level of the exported "
                              "chain)")
        if not model.is_infinite and args.truncation is not None:
            raise _UsageError(f"model {model.name} is finite; --truncation does not apply")
        _require_export_size(model, factory, args.truncation)
        from .plugins import guard
        from .protocol import get_protocol

        with guard(model):  # a plug-in's own failure is reported as its own
            chain = get_protocol(factory).bind(model).build(args.truncation)
        name = model.name
    prefix = args.out or name
    _require_export_folder(prefix)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.format == "mtx":
            files = write_mtx(chain, prefix if prefix.endswith(".mtx") else prefix + ".mtx", bool_vars=bool_vars,
                              rewards=rewards)
        else:
            files = write_explicit(chain, prefix, bool_vars=bool_vars, rewards=rewards)
    for w in caught:
        print(f"exactq: warning: {w.message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"model": name, "format": args.format, "files": files, "n_states": int(chain.n_states),
                          "warnings": [str(w.message) for w in caught]}))
    else:
        for f in files:
            print(f)


def _require_export_size(model, factory: str, truncation) -> None:
    """The exported chain's states (the model's ``<factory>_size``), checked against the memory budget first."""
    from .budget import require_states
    from .options import check_truncation
    from .protocol import get_protocol

    check_truncation(truncation)
    size = get_protocol(factory).bind(model).size
    if size is None:
        return
    try:
        n = size(truncation)
    except (TypeError, ValueError):
        return
    what = f"the chain of {model.name}" + (f" at --truncation {truncation}" if truncation is not None else "")
    require_states(n, what, hint="lower the truncation" if truncation is not None else "lower the size parameters")


def _require_export_folder(prefix: str) -> None:
    """The folder of ``--out PREFIX`` must exist and be writable (one line naming it, not an OSError)."""
    import os

    from .errors import FileError

    folder = os.path.dirname(prefix) or "."
    if not os.path.isdir(folder):
        why = "does not exist" if not os.path.exists(folder) else "is not a folder"
        raise FileError(f"cannot write {prefix}: --out's folder {folder} {why}")
    if not os.access(folder, os.W_OK):
        raise FileError(f"cannot write {prefix}: --out's folder {folder} is not writable")


def _cmd_reproduce(args) -> None:
    from .reproduce import reproduce, reproduction_names

    from .progress import status_line

    if not args.name:
        for k, v in reproduction_names().items():
            print(f"{k}: {v}")
        return
    line = status_line(args.progress, sys.stderr)
    try:
        text = reproduce(args.name, args.out, full=args.full, progress=line)
    finally:
        if line is not None:
            line.close()
    print(text)


def _check_shared_options(args) -> None:
    """The shared controls (``--tol``, ``--time-limit``, ``--truncation``, ``--workers``), validated once.

    The same rules, by the same functions (:mod:`exactq.options`), as the Python API:
    for ``solve``, ``check``, ``sweep`` and ``export``, model names and PRISM files alike.
    """
    from .options import check_controls

    given = {k: getattr(args, k) for k in ("tol", "time_limit", "truncation", "workers")
             if getattr(args, k, None) is not None}
    check_controls(**given)


def _input_of(argv) -> str:
    """The command line, for the last line of defence (at most 160 characters)."""
    import shlex

    text = "exactq " + shlex.join([a for a in argv if a != "--debug"])
    return text if len(text) <= 160 else text[:157] + "..."


def main(argv=None) -> int:
    """Entry point of the ``exactq`` script; returns the exit status.

    Every user error is one line on stderr and exit 2: exactq's own errors, and, as a
    last line of defence, the faults of the input that no check caught (a file that
    cannot be read or written, an encoding, an arithmetic overflow, too deep a nesting,
    memory exhausted), each naming the input. ``internal error`` (exit 3) is left for
    genuine bugs.
    """
    from .errors import ExactqError, file_error

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    debug = "--debug" in argv

    def fail(message: str) -> int:
        print(f"exactq: error: {_one_line(message) or 'unknown error'}", file=sys.stderr)
        return EXIT_USAGE

    try:
        args, extra = parser.parse_known_args(argv)
        # key=value parameters may also follow the options (solve ... --measure M k=2)
        if extra and args.command == "solve" and all(_KV.match(e) and not e.startswith("-") for e in extra):
            args.params = list(args.params) + extra
        elif extra and args.command == "check" and not any(e.startswith("-") for e in extra):
            args.args = list(args.args) + extra  # parameters and properties may follow the options too
        elif extra:
            raise _UsageError(f"unrecognized arguments: {' '.join(extra)}")
        _check_shared_options(args)
        status = {"models": _cmd_models, "solve": _cmd_solve, "check": _cmd_check, "export": _cmd_export,
                  "reproduce": _cmd_reproduce, "sweep": _cmd_sweep, "plot": _cmd_plot}[args.command](args)
    except _ShowVersion:
        print(f"exactq {version()}")
        return 0
    except _UsageError as e:
        return fail(str(e))
    except ExactqError as e:
        return fail(str(e) or type(e).__name__)
    except KeyboardInterrupt:
        print("exactq: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    # the last line of defence: faults of the input that no check caught, one line naming it
    except MemoryError as e:
        if debug:
            raise
        return fail(f"out of memory running {_input_of(argv)} ({str(e) or 'MemoryError'}); lower the sizes of the "
                    "input, or set EXACTQ_MEMORY_BUDGET so that exactq refuses it before allocating")
    except RecursionError:
        if debug:
            raise
        return fail(f"the input of {_input_of(argv)} is nested too deeply (Python's recursion limit "
                    f"{sys.getrecursionlimit()}); simplify the nested expression")
    except UnicodeError as e:
        if debug:
            raise
        return fail(f"cannot decode the input of {_input_of(argv)}: {e}")
    except OSError as e:
        if debug:
            raise
        return fail(str(file_error(e, "read or write")))
    except ArithmeticError as e:  # OverflowError, ZeroDivisionError, FloatingPointError
        if debug:
            raise
        return fail(f"arithmetic failure ({type(e).__name__}: {e}) computing {_input_of(argv)}; the parameters are "
                    "outside the range this method handles (another --method may)")
    except Exception as e:  # an internal error: still one line unless --debug
        if debug:
            raise
        print(f"exactq: internal error: {type(e).__name__}: {_one_line(str(e))} (rerun with --debug for the "
              "traceback)", file=sys.stderr)
        return EXIT_INTERNAL
    return status or 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
