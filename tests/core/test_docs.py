"""The documentation runs: every example on the docs pages is executed, and the site builds.

``pycon`` blocks of a page are doctests sharing one namespace; ``console`` blocks are
run through :func:`exactq.cli.main` (``$ exactq ...`` lines, the output that follows
matched with ``...`` as a wildcard). Each page runs in its own empty directory. The
Sphinx build (``-W``: a warning is an error) checks the pages, their links and the API
reference from the docstrings.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shlex
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
OWN_PAGES = ["index.md", *sorted(str(p.relative_to(DOCS)) for p in (DOCS / "tutorials").glob("*.md")),
             *sorted(str(p.relative_to(DOCS)) for p in (DOCS / "howto").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def blocks(page: str):
    return [(m.group(1), m.group(2), page.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(page)]


def run_console(text: str, where: str):
    from exactq.cli import main

    checker = doctest.OutputChecker()
    commands: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    assert commands, f"{where}: a console block without a $ command"
    for command, expected in commands:
        argv = shlex.split(command)
        assert argv[0] == "exactq", f"{where}: only exactq commands are run ({command})"
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(argv[1:])
        want = "\n".join(expected).strip() + "\n"
        got = out.getvalue()
        failing = any(line.startswith("exactq: error") for line in expected)
        assert (code in (1, 2)) if failing else code == 0, f"{where}: `{command}` exited {code}:\n{got}"
        if want.strip():
            assert checker.check_output(want, got, FLAGS), f"{where}: `{command}`\nexpected:\n{want}\ngot:\n{got}"


@pytest.mark.parametrize("name", OWN_PAGES)
def test_every_example_of_the_page_runs(name, tmp_path, monkeypatch):
    page = (DOCS / name).read_text()
    found = blocks(page)
    assert any(kind in ("pycon", "console") for kind, _, _ in found), f"{name} has no executed example"
    monkeypatch.chdir(tmp_path)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    namespace: dict = {"__name__": f"docs_{Path(name).stem}"}
    for kind, text, line in found:
        where = f"docs/{name}:{line}"
        if kind == "pycon":
            test = parser.get_doctest(text, namespace, where, str(DOCS / name), line)
            out = io.StringIO()
            result = runner.run(test, out=out.write, clear_globs=False)
            assert result.failed == 0, out.getvalue()
            namespace.update(test.globs)  # the next block of the page goes on from here
        elif kind == "console":
            run_console(text, where)


def test_the_site_builds_without_warnings(tmp_path):
    pytest.importorskip("myst_parser")
    pytest.importorskip("numpydoc")
    from sphinx.cmd.build import build_main

    warnings_file = tmp_path / "warnings.txt"
    code = build_main(["-W", "--keep-going", "-q", "-b", "html", "-w", str(warnings_file), "-d",
                       str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")])
    assert code == 0, warnings_file.read_text()
    html = (tmp_path / "html" / "api.html").read_text()
    for name in ("exactq.solve", "exactq.sweep", "exactq.check", "exactq.plotting.plot_table"):
        assert name in html
    assert os.path.exists(tmp_path / "html" / "howto" / "sweep.html")
