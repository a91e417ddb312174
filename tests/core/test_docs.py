"""The documentation runs as written: every example on the docs pages and in the README is executed.

``pycon`` blocks of a page are doctests sharing one namespace; ``console`` blocks
(``$ ...`` lines, the output that follows matched with ``...`` as a wildcard) and
``bash`` blocks (one command per line) are shell lines. Every shell line, and every
inline ``pip install ...`` / ``python -m ...`` command of the prose, is first read by
bash itself, with ``exactq``, ``pip`` and ``python`` as shell functions that print the
words they receive: a line that bash would split differently (an unquoted ``|``, a
stray quote) fails here exactly as it would in a user's terminal. The words bash gives
``exactq`` are then run through :func:`exactq.cli.main` in this process (fast, and the
same code as the installed script); ``pip install`` must name extras that
``pyproject.toml`` defines, and the README's test command must be the one CI runs.
Each page runs in its own empty directory. A block without a language that holds a
shell line is an error (say ``console``, ``bash``, or ``text`` for a synopsis). The
Sphinx build (``-W``: a warning is an error) checks the pages, their links and the API
reference from the docstrings.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OWN_PAGES = ["index.md", *sorted(str(p.relative_to(DOCS)) for p in (DOCS / "tutorials").glob("*.md")),
             *sorted(str(p.relative_to(DOCS)) for p in (DOCS / "howto").glob("*.md"))]
#: every page whose shell lines are checked (the README and the whole docs tree)
SHELL_PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")
                                    if "_build" not in p.parts)]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)
INLINE = re.compile(r"`((?:pip install|python -m) [^`]+)`")
SHELL_START = re.compile(r"^(\$ |exactq |pip |python )")
#: bash functions standing in for the commands: each prints its name and words, NUL-separated, one line per call
STUBS = "".join(f'{cmd}() {{ printf "%s\\0" {cmd} "$@"; printf "\\n"; }}; ' for cmd in ("exactq", "pip", "python"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def blocks(page: str):
    return [(m.group(1).strip(), m.group(2), page.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(page)]


def bash_words(command: str, where: str) -> list[list[str]]:
    """The commands and words bash makes of ``command`` (each a list: name, then arguments)."""
    run = subprocess.run(["bash", "-c", STUBS + command], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and not run.stderr.strip(), \
        f"{where}: bash does not run `{command}` as written: {run.stderr.strip() or f'exit {run.returncode}'}"
    calls = [line.split("\0")[:-1] for line in run.stdout.split("\n") if line]
    assert calls, f"{where}: `{command}` runs none of exactq, pip, python"
    return calls


def _extras() -> set:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        return set(tomllib.load(fh)["project"]["optional-dependencies"])


def _ci_test_command() -> list[str]:
    text = (ROOT / ".ci" / "run").read_text()
    line = next(line for line in text.splitlines() if line.strip().startswith("python -m pytest"))
    return [w for w in line.split() if w not in ("-p", "no:cacheprovider")]


def check_words(words: list[str], where: str):
    """A pip or python call of the docs: the extras it names exist, the test command is CI's."""
    name, args = words[0], words[1:]
    if name == "pip":
        assert args[:1] == ["install"], f"{where}: only `pip install` appears in the docs; got {words}"
        for target in args[1:]:
            m = re.fullmatch(r"(?:\.|exactq)(?:\[([\w,]+)\])?", target)
            assert m, f"{where}: pip installs {target!r}, not the project"
            for extra in (m.group(1) or "").split(","):
                assert not extra or extra in _extras(), f"{where}: pip install names the unknown extra {extra!r}"
    elif name == "python":
        assert args[:1] == ["-m"] and args[1:2] in (["pytest"], ["sphinx"]), f"{where}: unexpected {words}"
        if args[1] == "pytest":
            assert ["python", *args] == _ci_test_command(), f"{where}: the test command is not CI's: {words}"
        else:
            assert (DOCS / "conf.py").exists() and "docs" in args, f"{where}: the docs build must build docs/"


def shell_blocks(page: str):
    """``(kind, [(command, expected output lines)], line)`` for the console and bash blocks of a page."""
    out = []
    for kind, text, line in blocks(page):
        if kind == "console":
            commands: list = []
            for row in text.splitlines():
                if row.startswith("$ "):
                    commands.append((row[2:], []))
                elif commands:
                    commands[-1][1].append(row)
            out.append((kind, commands, line))
        elif kind in ("bash", "sh", "shell"):
            rows = [r.strip() for r in text.replace("\\\n", " ").splitlines()]
            out.append((kind, [(r, []) for r in rows if r and not r.startswith("#")], line))
    return out


def run_shell(commands, where: str, *, check_output: bool = True):
    """Run shell lines as bash reads them; exactq's words in this process, its output matched."""
    from exactq.cli import main

    checker = doctest.OutputChecker()
    assert commands, f"{where}: a shell block without a command"
    for command, expected in commands:
        calls = bash_words(command, where)
        out = io.StringIO()
        code = 0
        for words in calls:
            if words[0] != "exactq":
                check_words(words, where)
                continue
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = main(words[1:])
        want = "\n".join(expected).strip() + "\n"
        got = out.getvalue()
        failing = any(line.startswith("exactq: error") for line in expected)
        assert (code in (1, 2)) if failing else code == 0, f"{where}: `{command}` exited {code}:\n{got}"
        if check_output and want.strip():
            assert checker.check_output(want, got, FLAGS), f"{where}: `{command}`\nexpected:\n{want}\ngot:\n{got}"


def run_console(text: str, where: str):
    """A console block's ``$`` lines, run as bash reads them (kept for the plug-in tutorial's test)."""
    run_shell(shell_blocks("```console\n" + text + "```\n")[0][1], where)


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


@pytest.mark.parametrize("name", SHELL_PAGES)
def test_every_shell_line_runs_as_written(name, tmp_path, monkeypatch):
    """README and docs: shell lines through bash (the tutorials' own test runs their console blocks)."""
    page = (ROOT / name).read_text()
    monkeypatch.chdir(tmp_path)
    for kind, text, line in blocks(page):
        if kind in ("", "text") and name != "docs/tutorial_plugin.md":
            shell = [r for r in text.splitlines() if SHELL_START.match(r)]
            assert kind == "text" or not shell, \
                f"{name}:{line}: a block without a language holds the shell line {shell[0]!r}; mark it console or bash"
    for m in INLINE.finditer(page):
        where = f"{name}:{page.count(chr(10), 0, m.start()) + 1}"
        for words in bash_words(m.group(1), where):
            check_words(words, where)
    if name.startswith("docs/") and name[len("docs/"):] in OWN_PAGES:
        return  # their console blocks run (with the page's namespace) in test_every_example_of_the_page_runs
    for kind, commands, line in shell_blocks(page):
        run_shell(commands, f"{name}:{line}")


def test_a_shell_line_that_bash_splits_fails():
    """The check is real: an unquoted ``|`` in a sweep spec is a pipe to bash."""
    with pytest.raises(AssertionError, match="command not found"):
        bash_words("exactq sweep mm1 service_rate=1 --over arrival_rate=0.5|1.5 --out x.csv", "here")
    assert bash_words("exactq sweep mm1 --over 'arrival_rate=0.5|1.5'", "here") == \
        [["exactq", "sweep", "mm1", "--over", "arrival_rate=0.5|1.5"]]


def test_the_readme_python_example_runs(monkeypatch, tmp_path):
    page = (ROOT / "README.md").read_text()
    code = [text for kind, text, _ in blocks(page) if kind == "python"]
    assert code, "the README has a Python example"
    monkeypatch.chdir(tmp_path)
    for text in code:
        exec(compile(text, "README.md", "exec"), {"__name__": "readme"})


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
