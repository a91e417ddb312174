"""The ``exactq`` command line.

::

    exactq models [--json]
    exactq solve MODEL key=value ... [--measure M] [--method NAME] [--tol X]
                 [--truncation N] [--time-limit S] [--verify] [--certify] [--strict] [--no-lump] [--json]
    exactq check MODEL key=value ... 'QUERY' [--tol X] [--truncation N] [--time-limit S] [--json]
    exactq reproduce NAME [--out DIR] [--full]

Lists are comma separated (``service_rates=1,2``). Every user error ends with one
line on stderr (``exactq: error: ...``) and exit status 2; warnings are printed as
``exactq: warning: ...`` and, with ``--json``, listed under ``"warnings"``.
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


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="exactq", description="Exact performance values of queueing and load-balancing models.")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
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

    c = sub.add_parser("check", help="evaluate a CSL-style query on a model's CTMC")
    c.add_argument("model")
    c.add_argument("args", nargs="+", metavar="key=value ... QUERY")
    c.add_argument("--tol", type=float, default=1e-9)
    c.add_argument("--truncation", type=int)
    c.add_argument("--time-limit", type=float, metavar="SECONDS")
    c.add_argument("--strict", action="store_true")
    c.add_argument("--json", action="store_true")

    r = sub.add_parser("reproduce", help="re-create a seed paper's tables and figures")
    r.add_argument("name", nargs="?", help="omit to list the reproductions")
    r.add_argument("--out", help="directory for JSON tables and figures")
    r.add_argument("--full", action="store_true",
                   help="paper-scale run (tighter tolerances, larger chains; minutes)")
    return p


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
        print(json.dumps(payload, default=str))
    else:
        for line in warn_lines:
            print(f"exactq: warning: {line}", file=sys.stderr)
        bits = [f"method {result.method}"]
        if result.lower is not None or result.upper is not None:
            kind = "certified bounds" if "certificate" in result.info else "bounds"
            bits.append(f"{kind} [{result.lower!r}, {result.upper!r}]" if kind.startswith("certified") else
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

    model = build(args.model, **_parse_kv(args.params))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = solve(model, args.measure, method=args.method, tol=args.tol, truncation=args.truncation,
                       verify=args.verify, strict=args.strict, lump=not args.no_lump, time_limit=args.time_limit,
                       certify=args.certify,
                       options={k: _option_value(v) for k, v in _parse_kv(args.option).items()})
    _emit(args, model, result, caught)


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

    *kv, query = args.args
    model = build(args.model, **_parse_kv(kv))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = check(model, query, tol=args.tol, truncation=args.truncation, strict=args.strict,
                       time_limit=args.time_limit)
    _emit(args, model, result, caught)


def _cmd_reproduce(args) -> None:
    from .reproduce import reproduce, reproduction_names

    if not args.name:
        for k, v in reproduction_names().items():
            print(f"{k}: {v}")
        return
    print(reproduce(args.name, args.out, full=args.full))


def main(argv=None) -> int:
    """Entry point of the ``exactq`` script; returns the exit status."""
    from .errors import ExactqError

    parser = _build_parser()
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        args = parser.parse_args(argv)
        {"models": _cmd_models, "solve": _cmd_solve, "check": _cmd_check,
         "reproduce": _cmd_reproduce}[args.command](args)
    except _UsageError as e:
        print(f"exactq: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ExactqError as e:
        print(f"exactq: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("exactq: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # an internal error: still one line unless --debug
        if debug:
            raise
        print(f"exactq: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
