"""The ``exactq`` command line.

::

    exactq models [--json]
    exactq solve MODEL key=value ... [--measure M] [--method NAME] [--tol X]
                 [--truncation N] [--time-limit S] [--verify] [--certify] [--strict] [--no-lump] [--json]
    exactq check MODEL key=value ... 'QUERY' [--tol X] [--truncation N] [--time-limit S] [--json]
    exactq solve FILE.sm CONST=value ... [--measure reward:NAME|label:NAME] [...]
    exactq check FILE.sm ['PROPERTY' ...] [--props FILE.csl] [--const N=3,T=10] [--strict] [--json]
    exactq export MODEL key=value ... --format prism-explicit|mtx [--out PREFIX] [--truncation N]
    exactq check PREFIX.tra|PREFIX.mtx 'PROPERTY' ...    (an export read back)
    exactq --version
    exactq reproduce NAME [--out DIR] [--full]
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

    m = sub.add_parser("models", help="list models with their parameters, measures and methods")
    m.add_argument("name", nargs="?", help="show one model only")
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
    s.add_argument("--json", action="store_true")

    c = sub.add_parser("check", help="evaluate a CSL-style query on a model's CTMC, or PRISM properties on a "
                                     "PRISM file (FILE.sm, FILE.prism, FILE.pm, FILE.tra)")
    c.add_argument("model")
    c.add_argument("args", nargs="*", metavar="key=value ... QUERY")
    c.add_argument("--tol", type=float, default=1e-9)
    c.add_argument("--truncation", type=int)
    c.add_argument("--time-limit", type=float, metavar="SECONDS")
    c.add_argument("--strict", action="store_true")
    c.add_argument("--const", action="append", metavar="N=3,T=10",
                   help="values of the undefined constants of a PRISM model and of its properties")
    c.add_argument("--props", metavar="FILE.csl", help="a PRISM properties file (one property per line)")
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


def _one_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


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

    models = describe_models()
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
            print(f"    {p['name']} ({p['kind']}, {req}{rule}): {p['doc']}")
        print("  measures:")
        for k, v in m["measures"].items():
            star = " (default)" if k == m["default_measure"] else ""
            print(f"    {k}{star}: {v}")
        print(f"  methods: {', '.join(m['methods'])}")
        if m.get("method_options"):
            opts = "; ".join(f"{k}: {', '.join(v)}" for k, v in m["method_options"].items())
            print(f"  method options (--option key=value): {opts}")
        print()


def _cmd_solve(args) -> None:
    from .api import model as build, solve

    if _is_prism(args.model) and args.model.endswith((".tra", ".mtx")):  # exactq export's files
        from .prism import load_explicit

        if args.params:
            raise _UsageError(f"an explicit chain ({args.model}) has no parameters; got {args.params[0]!r}")
        model = load_explicit(args.model)
    elif _is_prism(args.model):  # a PRISM file: its key=value are its undefined constants
        from .prism import load_prism

        model = load_prism(args.model, _parse_kv(args.params), strict=args.strict)
    else:
        model = build(args.model, **_parse_kv(args.params))
    line = _progress_line(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
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
    """The truncation progress line on a terminal (not under --json), else None."""
    from .progress import TruncationLine, is_terminal

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


def _cmd_check(args) -> None:
    from .api import check, model as build

    if _is_prism(args.model):
        return _cmd_check_prism(args)
    if args.const or args.props:
        raise _UsageError(f"--const and --props apply to PRISM files; {args.model!r} is a model name")
    if not args.args:
        raise _UsageError("the following arguments are required: key=value ... QUERY")
    *kv, query = args.args
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


def _is_prism(name: str) -> bool:
    from .prism.models import is_prism_path

    return is_prism_path(name)


def _load_file_model(args):
    from .prism import load_explicit, load_prism

    if args.model.endswith((".tra", ".mtx")):
        if args.const:
            raise _UsageError("--const applies to PRISM model files, not to explicit .tra/.mtx files")
        return load_explicit(args.model)
    return load_prism(args.model, args.const, strict=args.strict)


def _cmd_check_prism(args) -> None:
    """``exactq check FILE.sm 'PROPERTY' ... [--props FILE] [--const ...]``: one answer per property."""
    from .api import check_properties

    kv = [a for a in args.args if _KV.match(a) and "[" not in a]
    if kv:
        raise _UsageError(f"give the constants of a PRISM file with --const; got {kv[0]!r}")
    if args.truncation is not None:
        raise _UsageError("--truncation does not apply to a PRISM file (its chain is finite)")
    texts = [(a, "property") for a in args.args]
    if args.props:
        try:
            with open(args.props, encoding="utf-8") as fh:
                texts.append((fh.read(), args.props))
        except OSError as exc:
            raise _UsageError(f"cannot read the properties file {args.props}: {exc.strerror or exc}") from None
    if not texts:
        raise _UsageError("give a PRISM property ('P=? [ F \"done\" ]') or --props FILE")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _load_file_model(args)
        model.built  # build once; its warnings (deadlocks) belong to every answer
    build_warnings = [str(w.message) for w in caught]
    printed_build = False
    for text, source in texts:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = check_properties(model, text, strict=args.strict, source_name=source)
        _emit_prism(args, model, results, build_warnings + [str(w.message) for w in caught],
                    printed=len(build_warnings) if printed_build else 0)
        printed_build = True
        build_warnings = [] if not args.json else build_warnings


def _emit_prism(args, model, results, warn_lines, printed=0) -> None:
    """Warnings on stderr (the first ``printed`` were already), the results on stdout."""
    for line in warn_lines[printed:]:
        print(f"exactq: warning: {line}", file=sys.stderr)
    for result in results:
        d = result.to_dict()
        info = d.get("info", {})
        if args.json:
            payload = {
                "model": model.path,
                "params": _params_json(model),
                "property": info.pop("property_name", None),
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
            payload.update(d)
            payload["warnings"] = warn_lines
            print(json.dumps(payload, default=str))
            continue
        bits = [f"method {result.method}"]
        if result.error_estimate is not None:
            bits.append(f"error estimate {result.error_estimate:.2e}")
        bits.append(f"{result.n_states} states, {info.get('n_transitions')} transitions")
        bits.append(f"build {info.get('build_seconds', 0.0):.3g} s, solve {info.get('solve_seconds', 0.0):.3g} s")
        name = info.get("property_name")
        label = f'"{name}": ' if name else ""
        print(f"{label}{result.measure} = {_fmt_value(result.value)}  ({', '.join(bits)})")
        for key in ("infinite", "filter"):
            if key in info:
                print(f"  {key}: {info[key]}")


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
            bool_vars = sorted(getattr(model, "_bool_vars", ()))
        name = os.path.splitext(os.path.basename(args.model))[0]
    else:
        from .api import model as build

        if args.const:
            raise _UsageError(f"--const applies to PRISM files; {args.model!r} is a model name")
        model = build(args.model, **_parse_kv(args.params))
        factory = "ctmc" if model.offers("ctmc") else ("dtmc" if model.offers("dtmc") else None)
        if factory is None:
            raise _UsageError(f"model {model.name} has no CTMC or DTMC representation to export")
        if getattr(model, "is_infinite", False) and args.truncation is None:
            raise _UsageError(f"model {model.name} is infinite; give --truncation N (the level of the exported "
                              "chain)")
        if not getattr(model, "is_infinite", False) and args.truncation is not None:
            raise _UsageError(f"model {model.name} is finite; --truncation does not apply")
        _require_export_size(model, factory, args.truncation)
        chain = getattr(model, factory)(args.truncation)
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

    check_truncation(truncation)
    size = getattr(model, f"{factory}_size", None)
    if not callable(size):
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

    if not args.name:
        for k, v in reproduction_names().items():
            print(f"{k}: {v}")
        return
    print(reproduce(args.name, args.out, full=args.full))


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
