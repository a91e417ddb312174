"""Tokens of the PRISM language, with the line and column of each, and the errors of the front end.

The lexer follows the PRISM manual ("The PRISM Language", "Property Specification"):
identifiers, integer and double literals (``1``, ``0.5``, ``.5``, ``1e-3``), quoted
names (``"done"``), the operators of commands and expressions (``-> ' .. => <=> <= >=
!= & | ! ? :``), ``//`` and ``/* ... */`` comments. CRLF, CR and LF line endings are all
accepted (columns count characters from 1, lines from 1).

Every error of the front end is one line that says where: ``tandem.sm, line 3, column
14: expected ';' to end the command; got 'endmodule'``.
"""

from __future__ import annotations

import re
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

from exactq.errors import ModelError, NotApplicableError, QuerySyntaxError

__all__ = [
    "Token",
    "Source",
    "QuerySource",
    "tokenize",
    "PrismSyntaxError",
    "PrismUnsupportedError",
    "PrismModelError",
    "PrismWarning",
    "warn",
    "read_source",
    "deep_recursion",
    "MAX_NESTING",
]

#: the deepest nesting of parentheses, operators, queries and formulas the front end accepts
MAX_NESTING = 1000
#: Python frames the front end may need at MAX_NESTING (about a dozen per level in the parser)
_FRAMES_NEEDED = 30 * MAX_NESTING + 2000


class PrismSyntaxError(QuerySyntaxError):
    """A malformed PRISM model or property: the message gives the line, the column and what was expected."""


class PrismUnsupportedError(NotApplicableError):
    """A construct PRISM accepts but exactq does not (MDPs, PTAs, nondeterminism, ...): one line naming it."""


class PrismModelError(ModelError):
    """A well-formed PRISM file whose meaning is wrong (types, undefined names, ranges, deadlocks in strict mode)."""


class PrismWarning(RuntimeWarning):
    """Something PRISM also warns about (deadlocks fixed by self-loops)."""


def warn(message: str) -> None:
    """Issue a :class:`PrismWarning` (the command line prints it as ``exactq: warning: ...``)."""
    warnings.warn(message, PrismWarning, stacklevel=3)


def read_source(path: str, what: str = "PRISM file") -> str:
    """The text of a PRISM model or properties file: UTF-8, or Latin-1 with a warning.

    A file that is not valid UTF-8 is read as Latin-1 (every byte is a character there,
    so nothing is lost), and a :class:`PrismWarning` names the first byte that is not
    UTF-8 and its position. An unreadable file is one :class:`PrismModelError` line.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "m.sm")
    >>> _ = open(f, "wb").write("// caf\\u00e9\\nctmc".encode("latin-1"))
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     text = read_source(f)
    >>> text.splitlines()[1], "byte 0xe9 at line 1" in str(w[0].message)
    ('ctmc', True)
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise PrismModelError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        warnings.warn(f"{path}: not UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}, column {col}); read as "
                      "Latin-1", PrismWarning, stacklevel=2)
        text = raw.decode("latin-1")
    if text.startswith("\ufeff"):  # a byte-order mark
        text = text[1:]
    return text


@contextmanager
def deep_recursion(what: str = "the expression"):
    """Room for the front end's recursion on deeply nested input, and one line instead of a RecursionError.

    The parser refuses nesting deeper than :data:`MAX_NESTING` levels with its position;
    formulas, labels and properties that expand to deeper trees, and any other
    structure whose depth exceeds what the tree walkers can take, end in one
    :class:`PrismModelError` line naming ``what``.
    """
    old = sys.getrecursionlimit()
    raised = old < _FRAMES_NEEDED
    if raised:
        sys.setrecursionlimit(_FRAMES_NEEDED)
    try:
        yield
    except RecursionError:
        raise PrismModelError(f"{what} is nested too deeply (more than {MAX_NESTING} levels of parentheses, "
                              "operators, formulas or queries)") from None
    finally:
        if raised and sys.getrecursionlimit() == _FRAMES_NEEDED:
            sys.setrecursionlimit(old)


@dataclass(frozen=True)
class Source:
    """The text being read and the name to report (a file name, or ``property``)."""

    name: str
    text: str

    def at(self, line: int, col: int) -> str:
        single = "\n" not in self.text.strip("\n")
        if single and line == 1:
            return f"{self.name}, column {col}" if self.name else f"column {col}"
        return f"{self.name}, line {line}, column {col}" if self.name else f"line {line}, column {col}"

    def syntax_error(self, line: int, col: int, message: str) -> PrismSyntaxError:
        err = PrismSyntaxError(f"{self.at(line, col)}: {message}")
        err.line, err.column = line, col
        return err

    def unsupported(self, line: int, col: int, message: str) -> PrismUnsupportedError:
        err = PrismUnsupportedError(f"{self.at(line, col)}: {message}")
        err.line, err.column = line, col
        return err

    def model_error(self, line: int, col: int, message: str) -> PrismModelError:
        err = PrismModelError(f"{self.at(line, col)}: {message}")
        err.line, err.column = line, col
        return err

    def end_text(self) -> str:
        """How an error names the end of the text (``got the end of the file``)."""
        return "the end of the property" if self.name == "property" else "the end of the file"


@dataclass(frozen=True)
class QuerySource(Source):
    """The text of one of exactq's native queries or expressions: errors as ``query syntax error at column N: ...``.

    Examples
    --------
    >>> str(QuerySource("query", "S=? [ x > ]").syntax_error(1, 11, "expected an expression"))
    'query syntax error at column 11: expected an expression'
    """

    def at(self, line: int, col: int) -> str:
        return f"query, column {col}" if line == 1 else f"query, line {line}, column {col}"

    def syntax_error(self, line: int, col: int, message: str) -> PrismSyntaxError:
        where = f"column {col}" if line == 1 else f"line {line}, column {col}"
        err = PrismSyntaxError(f"query syntax error at {where}: {message}")
        err.line, err.column, err.offset, err.text = line, col, col, self.text
        return err

    def end_text(self) -> str:
        return "end of input"


class Token(NamedTuple):
    """One token: ``kind`` in {ident, int, double, string, op, eof}; ``line``/``col`` 1-based.

    (A named tuple, not a frozen dataclass: a model file makes thousands of tokens, and a frozen
    dataclass's ``__init__`` costs three times as much, a third of the tokenizer's time.)
    """

    kind: str
    text: str
    line: int
    col: int

    def describe(self) -> str:
        return "the end of the file" if self.kind == "eof" else repr(self.text)


_COMMENTS = r"""
     (?P<comment>//[^\n]*)
    |(?P<block>/\*[\s\S]*?\*/)
    |(?P<open>/\*[\s\S]*)
    |"""
_TOKENS = r"""
     (?P<double>(?:\d+\.(?!\.)\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    |(?P<int>\d+)
    |(?P<ident>[A-Za-z_][A-Za-z_0-9]*)
    |(?P<string>"[^"\n]*")
    |(?P<op>OPS\|\|\||\|\||&&|==|\*\*|<=>|=>|->|<=|>=|!=|\.\.|[-+*/&|!?:;,()\[\]{}<>='^%.])
    """
#: the white space a token may follow (the lines are counted from the line breaks' positions)
_SPACE = " \t\f\v\n"
_LEADING = "[ \\t\\f\\v\\n]*(?:"
_TOKEN_RE = re.compile(_LEADING + _COMMENTS + _TOKENS.replace("OPS", "") + ")", re.VERBOSE)
#: exactq's native queries: no comments, so ``//`` is floor division (:mod:`exactq.query`); none of the model
#: files' punctuation (``'``, ``.``, ``..``, ``;``, ``->``)
_NATIVE_RE = re.compile(_LEADING + _TOKENS.replace(
    r"""(?P<op>OPS\|\|\||\|\||&&|==|\*\*|<=>|=>|->|<=|>=|!=|\.\.|[-+*/&|!?:;,()\[\]{}<>='^%.])""",
    r"""(?P<op>//|\|\||&&|==|\*\*|<=>|=>|<=|>=|!=|[-+*/&|!?:,()\[\]{}<>=^%])""") + ")", re.VERBOSE)
_NEWLINE = re.compile("\n")
#: what the tokenizer matches but keeps no token of
_SKIPPED = frozenset(("comment", "block"))
_new_tuple = tuple.__new__


def tokenize(source: Source, *, native: bool = False) -> list[Token]:
    """Split the source into tokens (whitespace and comments dropped; an ``eof`` token last).

    ``native``: the text is one of exactq's native queries, which has no comments
    (``//`` is an operator there, floor division).

    Raises
    ------
    PrismSyntaxError
        For a character that starts no token or an unterminated ``/*`` comment.

    Examples
    --------
    >>> [t.text for t in tokenize(Source("m", "x'=x+1; // done"))]
    ['x', "'", '=', 'x', '+', '1', ';', '']
    >>> tokenize(Source("m", "a\\r\\n  b"))[1].line, tokenize(Source("m", "a\\r\\n  b"))[1].col
    (2, 3)
    """
    import numpy as np

    text = source.text.replace("\r\n", "\n").replace("\r", "\n")
    pattern = _NATIVE_RE if native else _TOKEN_RE
    # one pass of the compiled pattern over the text (each match: the white space before a token, and the
    # token); the matches tile the text up to its trailing white space exactly when no character is left out
    found = list(pattern.finditer(text))
    covered = sum(m.end() - m.start() for m in found)
    last = found[-1].end() if found else 0
    breaks = np.array([m.start() for m in _NEWLINE.finditer(text)], dtype=np.int64)

    def where(pos: int) -> tuple[int, int]:
        line = int(np.searchsorted(breaks, pos))  # the line breaks before pos
        return line + 1, pos - (int(breaks[line - 1]) + 1 if line else 0) + 1

    if covered != last or text[last:].strip(_SPACE) or (found and found[-1].lastgroup == "open"):
        pos = 0
        for m in found:  # the first character that starts no token, or the comment left open (to the end)
            if m.start() != pos:
                break
            if m.lastgroup == "open":
                raise source.syntax_error(*where(m.start("open")), "the comment '/*' is never closed by '*/'")
            pos = m.end()
        while text[pos] in _SPACE:
            pos += 1
        raise source.syntax_error(*where(pos), f"unexpected character {text[pos]!r}")
    kinds = [m.lastgroup for m in found]
    starts = np.array([m.start(k) for m, k in zip(found, kinds)], dtype=np.int64)
    line = np.searchsorted(breaks, starts)
    cols = (starts - np.where(line > 0, breaks[np.maximum(line - 1, 0)] + 1, 0) + 1).tolist() if breaks.size \
        else (starts + 1).tolist()
    lines = (line + 1).tolist()
    ends = [m.end() for m in found]
    tokens = [_new_tuple(Token, (k, text[b:e], ln, c))
              for k, b, e, ln, c in zip(kinds, starts.tolist(), ends, lines, cols) if k not in _SKIPPED]
    tokens.append(Token("eof", "", *where(len(text))))
    return tokens
