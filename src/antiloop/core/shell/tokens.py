"""Shell words: a POSIX-ish tokenizer and the simple commands of a command line.

Used by ``antiloop.core.procedure`` to read what a shell tool runs. ``tokenize`` handles quoting
(single, double, ANSI-C ``$'..'``), escapes, ``$(..)``/backticks kept whole, operators,
redirections with their file descriptors and heredoc bodies; ``commands`` groups the tokens
into simple commands with the separator after each. Nothing is expanded or run.

Example:
    >>> [c.words for c in commands(tokenize("cd src && grep -rn 'a b' . | head"))]
    [['cd', 'src'], ['grep', '-rn', 'a b', '.'], ['head']]
"""

from __future__ import annotations

from antiloop.core.text.patterns import LazyPattern

__all__ = [
    "INPUTS",
    "RESERVED",
    "SHELLS",
    "SKIP_WORDS",
    "WRITES",
    "Command",
    "Redirect",
    "Token",
    "commands",
    "plain_tokens",
    "shell_script",
    "stripped",
    "tokenize",
    "tokens_of",
    "unparsable",
]

_OPERATORS = {
    op: len(op)
    for op in (
        "&&", "||", ";;", "|&", "&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<>", "<&",
        ";", "&", "|", "<", ">", "(", ")",
    )
}  # fmt: skip
_REDIRECTS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<>", "<&", "<", ">"})
INPUTS = ("<<<", "<<-", "<<", "<", "0<")
WRITES = frozenset({"&>>", "&>", ">>", ">|", ">", "<>"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
RESERVED = frozenset(
    {"for", "while", "until", "if", "case", "select", "function", "done", "fi", "esac", "in",
     "then", "do", "else", "elif", "{", "}", "!", "[[", "]]"}
)  # fmt: skip
SKIP_WORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "{"})
_META = " \t\r\n;&|<>()"
_PLAIN_RUN = LazyPattern(r"[^\s;&|<>()'\"\\$`]+")
_QUOTED_RUN = LazyPattern(r"[^\"\\$`]+")  # inside double quotes: kept as written
_DIGITS = LazyPattern(r"\d+")
# the fast paths of tokens_of: plain words; words, single quotes and ; & | && || only
_SIMPLE = LazyPattern(
    r"(?:[A-Za-z0-9_./=:@%+,*?~^-]|'[^\s'\"\\$`<>()#;&|]*')+"
    r"(?: +(?:[A-Za-z0-9_./=:@%+,*?~^-]|'[^\s'\"\\$`<>()#;&|]*')+)*"
)  # plain words, or words with single-quoted parts holding no blank or operator (one way
# to match each character: no backtracking blow-up)
_WORDS_OPS = LazyPattern(r"(?:[^\s;&|']+|'[^']*')+|&&|\|\||;;|\|&|[;&|]")
_NOT_WORDS_OPS = LazyPattern(r"[\"\\$`<>()#\n\r]")


class Redirect:
    """One redirection: operator (with its fd), target word or heredoc body."""

    __slots__ = ("heredoc", "op", "quoted", "target")

    def __init__(self, op: str, target: str, heredoc: bool = False, quoted: bool = False) -> None:
        self.op = op
        self.target = target
        self.heredoc = heredoc
        self.quoted = quoted


# A token: a word (str), a separator ("&&", "|", ";", "&", "(", ")"…), a redirection, or
# ("err", reason) last when a quote was left open.
Token = tuple[str, str] | Redirect


def _skip_group(s: str, i: int, open_ch: str, close_ch: str) -> int:
    """Index just after the ``close_ch`` matching the ``open_ch`` at ``s[i]``; quote-aware."""
    depth = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"':
            i += 1
            while i < n and s[i] != '"':
                i += 2 if s[i] == "\\" else 1
            i += 1
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _skip_backtick(s: str, i: int) -> int:
    n = len(s)
    i += 1
    while i < n and s[i] != "`":
        i += 2 if s[i] == "\\" else 1
    return min(i + 1, n)


_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
                 "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v", "?": "?"}  # fmt: skip
# bash's numeric and control escapes of $'..': octal, \xHH, \uHHHH, \UHHHHHHHH, \cX
_ANSI_CODE = LazyPattern(r"[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|c[^']")


def _ansi_code(code: str) -> str:
    """The character of a numeric or control escape (``101``, ``x41``, ``u263a``, ``cA``)."""
    if code[0] == "c":
        return chr(ord(code[1]) & 0x1F)
    value = int(code, 8) & 0xFF if code[0] in "01234567" else int(code[1:], 16)
    return chr(value) if value <= 0x10FFFF else ""  # bash writes nothing past U+10FFFF


def _read_word(s: str, i: int) -> tuple[str, int, bool]:
    """Read one shell word from ``s[i]``: (text with quotes removed, end index, quoted).

    The end index is past the end of ``s`` when a quote was left open.
    """
    n = len(s)
    buf: list[str] = []
    quoted = False
    plain_run = _PLAIN_RUN.compiled.match
    quoted_run = _QUOTED_RUN.compiled.match
    while i < n:
        m = plain_run(s, i)
        if m:
            buf.append(m.group())
            i = m.end()
            continue
        c = s[i]
        if c in _META or c.isspace():
            break
        if c == "'":
            j = s.find("'", i + 1)
            j = n if j < 0 else j
            buf.append(s[i + 1 : j])
            quoted = True
            i = j + 1
        elif c == '"':
            quoted = True
            i += 1
            while i < n and s[i] != '"':
                run = quoted_run(s, i)
                if run:
                    buf.append(run.group())
                    i = run.end()
                    continue
                ch = s[i]
                if ch == "\\" and i + 1 < n and s[i + 1] in '"\\$`\n':
                    if s[i + 1] != "\n":
                        buf.append(s[i + 1])
                    i += 2
                elif ch == "$" and s.startswith("$(", i):
                    j = _skip_group(s, i + 1, "(", ")")
                    buf.append(s[i:j])
                    i = j
                elif ch == "`":
                    j = _skip_backtick(s, i)
                    buf.append(s[i:j])
                    i = j
                else:
                    buf.append(ch)
                    i += 1
            i += 1
        elif c == "\\":
            if i + 1 == n:  # a backslash at the very end is itself
                buf.append(c)
                i += 1
                continue
            if s[i + 1] != "\n":
                buf.append(s[i + 1])
            i += 2
        elif c == "`":
            j = _skip_backtick(s, i)
            buf.append(s[i:j])
            i = j
        elif c == "$" and i + 1 < n and s[i + 1] in "'({":
            nxt = s[i + 1]
            if nxt == "'":
                quoted = True
                i += 2
                while i < n and s[i] != "'":
                    code = _ANSI_CODE.compiled.match(s, i + 1) if s[i] == "\\" else None
                    if code is not None:
                        buf.append(_ansi_code(code.group()))
                        i = code.end()
                    elif s[i] == "\\" and i + 1 < n:
                        buf.append(_ANSI_ESCAPES.get(s[i + 1], "\\" + s[i + 1]))
                        i += 2
                    else:
                        buf.append(s[i])
                        i += 1
                i += 1
            else:
                j = _skip_group(s, i + 1, nxt, ")" if nxt == "(" else "}")
                buf.append(s[i:j])
                i = j
        else:  # a lone "$"
            buf.append(c)
            i += 1
    return "".join(buf), i, quoted  # past the end: a quote left open


def tokenize(s: str) -> list[Token]:
    """Split a command into words, separators and redirections (a subset of POSIX sh)."""
    tokens: list[Token] = []
    pending: list[tuple[Redirect, str, bool]] = []  # heredocs waiting for their bodies
    open_quote = False
    n = len(s)
    i = 0
    while i < n:
        c = s[i]
        if c == "\n":
            tokens.append(("sep", ";"))
            i += 1
            for redir, delim, strip_tabs in pending:
                lines: list[str] = []
                while i < n:
                    j = s.find("\n", i)
                    j = n if j < 0 else j
                    line = s[i:j]
                    i = j + 1
                    if strip_tabs:
                        line = line.lstrip("\t")
                    if line == delim:
                        break
                    lines.append(line)
                redir.target = "\n".join(lines)
            pending.clear()
            continue
        if c in " \t\r" or c.isspace():
            i += 1
            continue
        if c == "\\" and s.startswith("\\\n", i):
            i += 2
            continue
        if c == "#":
            j = s.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in ";&|<>()":
            op = s[i : i + 3] if s[i : i + 3] in _OPERATORS else s[i : i + 2]
            if op not in _OPERATORS:
                op = c
            i += len(op)
            if op in _REDIRECTS:
                fd = ""
                last = tokens[-1] if tokens else None
                if isinstance(last, tuple) and last[0] == "fd":
                    fd = last[1]
                    tokens.pop()
                while i < n and s[i] in " \t":
                    i += 1
                target, i, quoted = _read_word(s, i)
                if i > n:
                    i, open_quote = n, True
                redir = Redirect(fd + op, target)
                if op in ("<<", "<<-"):
                    redir.heredoc, redir.quoted = True, quoted
                    pending.append((redir, target, op == "<<-"))
                tokens.append(redir)
            else:
                tokens.append(("sep", op))
            continue
        word, j, quoted = _read_word(s, i)
        if j > n:
            j, open_quote = n, True
        if not quoted and j < n and s[j] in "<>" and _DIGITS.fullmatch(word):
            tokens.append(("fd", word))
        else:
            tokens.append(("w", word))
        i = j
    if open_quote:
        tokens.append(("err", "a quote left open"))
    return tokens


def tokens_of(command: str) -> list[Token]:
    """The tokens of a command, as ``tokenize`` reads them, fast for most.

    Plain words, and words with single-quoted strings and the separators ``; & | && || ;; |&``
    (no double quotes, escapes, expansions, redirections or comments) skip the tokenizer.
    """
    tokens = plain_tokens(command)
    return tokenize(command) if tokens is None else tokens


def plain_tokens(command: str) -> list[Token] | None:
    """The tokens of a command of words, single quotes and ``; & | && || ;; |&`` only, else None.

    The words are the only tokens of that kind, and none of them is a redirection.
    """
    if _SIMPLE.compiled.fullmatch(command):
        return [("w", w.replace("'", "")) for w in command.split()]
    if command.count("'") % 2 == 0 and _NOT_WORDS_OPS.compiled.search(command) is None:
        # a quote is removed with what it quotes kept
        return [
            ("sep", t) if t in _SEPARATORS else ("w", t.replace("'", ""))
            for t in _WORDS_OPS.compiled.findall(command)
        ]
    return None


_SEPARATORS = frozenset({"&&", "||", ";;", "|&", ";", "&", "|"})


class Command:
    """A simple command: its words, its redirections and the separator after it."""

    __slots__ = ("redirs", "sep", "words")

    def __init__(self, words: list[str], redirs: list[Redirect], sep: str) -> None:
        self.words = words
        self.redirs = redirs
        self.sep = sep


def commands(tokens: list[Token]) -> list[Command]:
    """Group tokens into simple commands; newlines read as ``;``; parentheses only group."""
    cmds: list[Command] = []
    words: list[str] = []
    redirs: list[Redirect] = []
    for tok in tokens:
        if isinstance(tok, Redirect):
            redirs.append(tok)
        elif tok[0] == "w":
            words.append(tok[1])
        elif tok[1] in ("(", ")") or tok[0] == "err":
            continue
        elif words or redirs:
            cmds.append(Command(words, redirs, tok[1]))
            words, redirs = [], []
        elif cmds and cmds[-1].sep == ";":
            cmds[-1].sep = tok[1]
    if words or redirs:
        cmds.append(Command(words, redirs, ""))
    if cmds and cmds[-1].sep == ";":
        cmds[-1].sep = ""
    return cmds


# words after which "(" opens a group or a list: reserved words, an array assignment's "x="
_BEFORE_GROUP = frozenset({"if", "elif", "then", "else", "while", "until", "do", "for", "!", "{",
                           "[[", "time", "select", "function", "coproc"})  # fmt: skip


def unparsable(tokens: list[Token]) -> bool:
    """Whether bash would refuse the command: a quote left open, a parenthesis out of place.

    Example:
        >>> unparsable(tokenize("python -c print(parse_one(1))")), unparsable(tokenize("f() (ls)"))
        (True, False)
    """
    depth = 0
    words = 0  # words of the simple command so far
    prev: Token | None = None
    for i, tok in enumerate(tokens):
        if isinstance(tok, Redirect):  # ``<(cmd)``: a process substitution
            prev = tok
            continue
        kind, text = tok
        if kind == "err":
            return True
        if kind == "w":
            if text == "case":  # its patterns close parentheses they never opened
                return False
            words += 1
        elif text == "(":
            if isinstance(prev, tuple) and prev[0] == "w" and prev[1] not in _BEFORE_GROUP:
                function = words == 1 and tokens[i + 1 : i + 2] == [("sep", ")")]
                if not (function or prev[1].endswith("=")):
                    return True
            depth += 1
            words = 0
        elif text == ")":
            if depth == 0:
                return True
            depth -= 1
        elif kind == "sep":
            words = 0
        prev = tok
    return False


def stripped(command: str) -> str:
    """The command without surrounding blanks, but for a trailing backslash's blank."""
    text = command.strip()
    if text.endswith("\\"):
        rest = command.lstrip()
        blank = rest[len(text) : len(text) + 1]
        odd = (len(text) - len(text.rstrip("\\"))) % 2 == 1
        if blank == "\n" and odd:  # a backslash-newline continues the line: bash drops both
            text = text[:-1].rstrip()
        elif blank.isspace() and blank != "\n":  # an escaped trailing blank is a word:
            text = rest  # ``printf \ `` prints a space
    return text


def shell_script(words: list[str]) -> str | None:
    """The script of ``bash -lc SCRIPT`` / ``sh -c SCRIPT`` (no wrapper before it), else None."""
    if not words or words[0].rpartition("/")[2] not in SHELLS:
        return None
    k, n = 1, len(words)
    while k < n and words[k].startswith(("-", "+")) and not words[k].startswith("--"):
        if "c" in words[k][1:]:
            return words[k + 1] if k + 1 < n else None
        k += 2 if words[k] in ("-o", "+o", "-O", "+O") else 1
    return None
