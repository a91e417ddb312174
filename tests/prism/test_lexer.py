"""The tokenizer: positions of tokens (lines and columns from the line breaks), comments, and its errors."""

from __future__ import annotations

import pytest

from exactq.prism.lexer import PrismSyntaxError, Source, Token, tokenize


def toks(text: str, native: bool = False) -> list[tuple]:
    return [tuple(t) for t in tokenize(Source("m.sm", text), native=native)]


def test_tokens_carry_their_line_and_column_across_comments_and_line_endings():
    text = "x : [0..N] /* a\r\n comment */ init 1;\r\n  // line\n\t[] x>0 -> 0.5:(x'=x-1);"
    out = toks(text)
    assert out[:6] == [("ident", "x", 1, 1), ("op", ":", 1, 3), ("op", "[", 1, 5), ("int", "0", 1, 6),
                       ("op", "..", 1, 7), ("ident", "N", 1, 9)]
    init = out[7]
    assert init == ("ident", "init", 2, 13)  # after the comment that spans the line break
    assert ("op", "[", 4, 2) in out and ("double", "0.5", 4, 12) in out
    assert out[-1] == ("eof", "", 4, len("\t[] x>0 -> 0.5:(x'=x-1);") + 1)
    assert all(isinstance(t, Token) for t in tokenize(Source("m", text)))


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "// only a comment", "/* */", "x // trailing\t "])
def test_white_space_and_comments_alone_leave_only_what_is_there(text):
    out = toks(text)
    assert out[-1][0] == "eof"
    assert [t[1] for t in out[:-1]] == (["x"] if text.startswith("x") else [])


@pytest.mark.parametrize("text, line, col, what", [
    ("a # b", 1, 3, "unexpected character '#'"),
    ("a\n   € b", 2, 4, "unexpected character '€'"),
    ("x = 1;\n  /* never closed\n y", 2, 3, "never closed"),
    ("x /* one */ y /* two", 1, 15, "never closed"),
    ("ok\n\t  @", 2, 4, "unexpected character '@'"),
])
def test_errors_name_the_first_bad_character_or_the_open_comment(text, line, col, what):
    where = f"line {line}, column {col}" if "\n" in text else f"column {col}"  # (one line: no line number)
    with pytest.raises(PrismSyntaxError, match=f"{where}: .*{what}"):
        tokenize(Source("m.sm", text))


def test_native_queries_read_slash_slash_as_an_operator():
    assert [t[1] for t in toks("q1 // 2", native=True)] == ["q1", "//", "2", ""]
    assert [t[1] for t in toks("q1 // 2")] == ["q1", ""]  # a comment in a model file
