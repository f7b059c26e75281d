"""The engine: a shell command's operation, canonical words, paths and programs (section 3).

``shell(command, cwd, rules)`` tokenizes the command (``tokens``), looks through leading
``cd DIR &&`` and each simple command's ``Wrapper`` rows, reads the program's arguments by its
``Program`` row (flags split, sorted when they commute, patterns read as words, paths
canonical) and takes the run kind of a ``Runner`` row (``antiloop.core.rules.programs``).
"""

from __future__ import annotations

from typing import Any

from antiloop.core.forms import (
    canonical_path,
    dumps_items,
    pattern_words,
    render,
    strip_line_ends,
    verbatim,
)
from antiloop.core.rules.programs import OPERATIONS, Program, Runner
from antiloop.core.rules.ruleset import Rules
from antiloop.core.shell.tokens import (
    INPUTS,
    RESERVED,
    SKIP_WORDS,
    WRITES,
    Command,
    Token,
    commands,
    plain_tokens,
    shell_script,
    stripped,
    tokenize,
    unparsable,
)
from antiloop.core.text.patterns import Patterns

__all__ = ["Shell", "read_text", "read_tokens", "shell"]

#: (operation, params, context, paths in order, programs, (program, operation) of each part)
Shell = tuple[str, str, str, list[str], tuple[str, ...], tuple[tuple[str, str], ...]]

_RANK = {op: i for i, op in enumerate(OPERATIONS)}
_NO_PROGRAM = Program("", files=False)
_NONE: frozenset[str] = frozenset()
RX = Patterns(
    assign=r"[A-Za-z_][A-Za-z0-9_]*=",
    versioned=r"(.*?\D)\d+(?:\.\d+)*",
    ext=r"\.[A-Za-z][A-Za-z0-9_]{0,9}$",
    not_pathy=r"[\s'\"`$;&|<>()\\{}=]",
    sed_script=r"^(?:\d+,?\d*)?[sy]([/|#:,@!]).*\1.*\1\w*$",
    body=r"([^\n]*)\n(?:((?s:.*))\n)?end_of_\w+[ \t]*",  # the body: any number of lines
)


def _base(word: str) -> str:
    i = word.rfind("/")
    return word if i < 0 else word[i + 1 :]


def _higher(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def _skip_opts(
    words: list[str],
    i: int,
    short: str,
    long: frozenset[str],
    stop: frozenset[str] = _NONE,
    module: str = "-",
) -> int:
    """Index of the first word at or after ``i`` that is not an option of a wrapper."""
    n = len(words)
    while i < n:
        w = words[i]
        if w == "--":
            return i + 1
        if not w.startswith("-") or w == "-" or w == module or w in stop:
            return i
        if w.startswith("--"):
            i += 2 if ("=" not in w and w[2:] in long) else 1
        else:
            i += 2 if (len(w) == 2 and w[1] in short) else 1
    return i


def _unwrap(words: list[str], rules: Rules) -> int:
    """Index of the real command's first word, looking through wrappers (section 3.1)."""
    i, n = 0, len(words)
    wrappers = rules.wrappers
    while i < n:
        w = words[i]
        if w in SKIP_WORDS or (RX.assign.match(w) and "/" not in w.split("=", 1)[0]):
            i += 1
            continue
        base = _base(w)
        rows = wrappers.get(base)
        if rows is None and base[-1:].isdigit():
            m = RX.versioned.fullmatch(base)
            rows = wrappers.get(m.group(1)) if m is not None else None
            if rows is not None:
                rows = tuple(r for r in rows if r.versioned)
        if not rows:
            return i
        nxt = words[i + 1] if i + 1 < n else ""
        row = None  # the row of its subcommand (npm exec), else the one without (npx)
        for r in rows:
            if not r.sub or r.sub == nxt:
                row = r
                if r.sub:
                    break
        if row is None:
            return i
        k = _skip_opts(
            words, i + (2 if row.sub else 1), row.short, row.long, row.stop, row.module or "-"
        )
        if row.module:
            # the module is the program: python -m pytest runs pytest; else python runs itself
            return k + 1 if k + 1 < n and words[k] == row.module else i
        i = min(k + row.operands, n) if k < n else k
    return i


def _parse_flags(args: list[str], spec: Program) -> tuple[list[tuple[str, str | None]], list[int]]:
    """Split arguments into flags (bundles split, values kept with them) and operand indices."""
    flags: list[tuple[str, str | None]] = []
    operands: list[int] = []
    dashdash = False
    short, long = spec.short, spec.long
    i, n = 0, len(args)
    while i < n:
        w = args[i]
        i += 1
        if dashdash or w == "-" or not w.startswith("-"):
            operands.append(i - 1)
            continue
        if w == "--":
            dashdash = True
            continue
        if w in spec.rest:
            flags.append((w, "\x00".join(args[i:])))
            break
        if w.startswith("--"):
            name, eq, val = w.partition("=")
            if eq:
                flags.append((name, val))
            elif name[2:] in long and i < n:
                flags.append((name, args[i]))
                i += 1
            else:
                flags.append((name, None))
            continue
        k, m = 1, len(w)
        while k < m:
            ch = w[k]
            if ch.isdigit():
                e = k
                while e < m and w[e].isdigit():
                    e += 1
                flags.append(("-" + w[k:e], None))
                k = e
            elif ch in short:
                if k + 1 < m:
                    flags.append(("-" + ch, w[k + 1 :]))
                elif i < n:
                    flags.append(("-" + ch, args[i]))
                    i += 1
                else:
                    flags.append(("-" + ch, None))
                break
            else:
                flags.append(("-" + ch, None))
                k += 1
    return flags, operands


def _matches(row: Runner, word: str) -> bool:
    if word in row.words:
        return True
    if not row.scoped or ":" not in word:
        return False
    return (
        word.split(":", 1)[0] if row.scoped == "prefix" else word.rsplit(":", 1)[1]
    ) in row.words


def _run_kind(rows: tuple[Runner, ...], args: list[str]) -> str | None:
    """``test`` or ``build`` by the first runner row a run matches, else None."""
    ops = [a for a in args if not a.startswith("-")]
    for row in rows:
        if not row.words:
            return row.kind
        if row.anywhere:
            if any(_matches(row, o) for o in ops):
                return row.kind
            continue
        sub = ops[0] if ops else ""
        if sub in row.through and len(ops) > 1:
            sub = ops[1]
        elif sub in row.direct:
            return row.kind
        if _matches(row, sub):
            return row.kind
    return None


def _pathlike(word: str) -> bool:
    """An operand that looks like a path: it contains ``/`` or ends in a file extension."""
    return (
        ("/" in word or RX.ext.search(word) is not None)
        and not word.startswith("-")
        and RX.not_pathy.search(word) is None
        and RX.sed_script.match(word) is None
    )


def _canon_word(word: str, cwd: str | None) -> str:
    """A shell word in canonical form: a multi-line body loses trailing spaces; paths canonical."""
    if "\n" in word:
        return verbatim(word)
    if _pathlike(word):
        return canonical_path(word, cwd) or word
    return word


def _join(base: str | None, word: str, path: str, cwd: str | None) -> str:
    """The canonical ``path`` of ``word`` seen from the directory ``base`` of a leading ``cd``.

    An absolute word names the same file wherever the ``cd`` went, even when it lies under
    ``cwd`` (``cd src && cat /w/a.py`` in ``/w`` reads ``a.py``).
    """
    if base is None or path.startswith(("/", "~")) or word.lstrip().startswith("/"):
        return path
    return canonical_path(base + "/" + path, cwd) or path


class _Part:
    """The canonical reading of one simple command of a chain."""

    __slots__ = ("key", "op", "paths", "pattern", "program", "text")

    def __init__(self, key: list[str], text: list[str]) -> None:
        self.key = key
        self.text = text
        self.paths: list[str] = []
        self.op = "bash"
        self.program: str | None = None
        self.pattern: str | None = None


def _analyse(cmd: Command, cwd: str | None, base: str | None, rules: Rules) -> _Part:
    """Operation, canonical words, paths and search pattern of one simple command."""
    words = cmd.words
    j = _unwrap(words, rules)
    key = [verbatim(w) for w in words[:j]]
    part = _Part(key, [render(w) for w in key])
    if j < len(words):
        _program(part, words[j], words[j + 1 :], cwd, base, rules)
    key, text, paths = part.key, part.text, part.paths
    # Standard input first: its place among the output redirections changes nothing.
    for r in sorted(cmd.redirs, key=lambda r: not r.op.startswith(INPUTS)):
        op, target = r.op, r.target
        bare = op.lstrip("0123456789")
        if r.heredoc:
            key.append(op + ("'" if r.quoted else "") + "\x00" + strip_line_ends(target))
            text.append(op + "EOF")
        elif bare in (">&", "<&") and (target.isdigit() or target == "-"):
            key.append(op + target)
            text.append(op + target)
        elif bare == "<<<":
            key.append(op + "\x00" + _canon_word(target, cwd))
            text.append(op + " " + render(target))
        else:
            ct = target if target == "/dev/null" else (canonical_path(target, cwd) or target)
            key.append(op + "\x00" + ct)
            text.append(op + " " + render(ct))
            if ct != "/dev/null":
                paths.append(_join(base, target, ct, cwd))
                if bare in WRITES or bare == ">&":
                    part.op = _higher(part.op, "edit")
    return part


def _program(
    part: _Part, prog_word: str, args: list[str], cwd: str | None, base: str | None, rules: Rules
) -> None:
    """Fill ``part`` for the program ``prog_word`` run with ``args`` (wrappers already seen)."""
    key, text, paths = part.key, part.text, part.paths
    prog = _base(prog_word)
    head = [prog_word]
    row = rules.programs.get(prog, _NO_PROGRAM)
    if row.subcommands:
        k = _skip_opts(args, 0, row.short, row.long)
        sub = rules.programs.get(prog + " " + args[k]) if k < len(args) else None
        if sub is None:
            row = _NO_PROGRAM
        else:
            row = sub
            head += args[: k + 1]
            args = args[k + 1 :]
    if prog not in RESERVED:
        part.program = prog
    if row.commute:
        _commuting(part, head, args, row, cwd, base)
        return
    key.extend(verbatim(w) for w in head)
    if not row.files:
        kind = _run_kind(rules.runners[prog], args) if prog in rules.runners else None
        part.op = row.op or kind or part.op
        if row.expression:  # find: only the start points are paths; tests keep their text
            k = _find_paths(args, row.expression, cwd, base, paths)
            key.extend(_canon_word(w, cwd) for w in args[:k])
            key.extend(verbatim(w) for w in args[k:])
        else:
            key.extend(_canon_word(w, cwd) for w in args)
            for w in args:
                c = canonical_path(w, cwd) if _pathlike(w) else None
                if c is not None:
                    paths.append(_join(base, w, c, cwd))
        text.extend(render(w) for w in key[len(text) :])
        return
    flags, operand_idx = _parse_flags(args, row)
    names = {f for f, _ in flags}
    operands = [args[i] for i in operand_idx]
    skip = -1
    if row.script and not names & row.script_flags and operand_idx:
        skip = operand_idx[0]
        operands = operands[1:]
    op = next((o for f, o in row.op_flags if f in names), row.op)
    if row.op == "edit" or row.file_op == "edit":  # a writer's /dev/null names no file
        operands = [o for o in operands if o != "/dev/null"]
    operands += [v for f, v in flags if v and f in row.file_flags]
    if row.file_op and operands:
        op = op or row.file_op
    part.op = op or part.op
    key.extend(w if i == skip else _canon_word(w, cwd) for i, w in enumerate(args))
    text.extend(render(w) for w in key[len(text) :])
    if part.op == "bash":
        operands = [o for o in operands if _pathlike(o)]
    for o in operands:
        c = canonical_path(o, cwd)
        if c is not None and c != "-":
            paths.append(_join(base, o, c, cwd))


def _find_paths(
    args: list[str], tests: frozenset[str], cwd: str | None, base: str | None, paths: list[str]
) -> int:
    """Add the start points of ``find`` and the file patterns of its tests (``-name '*.ts'``).

    Returns:
        The index of the first word of the expression (after the start points).
    """
    k, n = 0, len(args)
    while k < n and (args[k] in ("-H", "-L", "-P") or args[k].startswith("-O")):
        k += 1
    while k < n and not args[k].startswith(("-", "(", "!", ")")):
        c = canonical_path(args[k], cwd)
        if c is not None:
            paths.append(_join(base, args[k], c, cwd))
        k += 1
    paths.extend(
        canonical_path(args[m + 1], cwd) or args[m + 1] for m in range(k, n - 1) if args[m] in tests
    )
    return k


def _commuting(
    part: _Part, head: list[str], args: list[str], spec: Program, cwd: str | None, base: str | None
) -> None:
    """A search or list program: flags split and sorted, the pattern read as its words."""
    flags, operand_idx = _parse_flags(args, spec)
    part.op = "grep" if spec.search else "list"
    operands = [args[i] for i in operand_idx]
    patterns: list[str] = []
    canon_flags: list[tuple[str, str | None]] = []
    globs: list[str] = []
    for f, v in flags:
        if v is not None and f in spec.patterns and spec.search:
            v = "\x01" + pattern_words(v)
            patterns.append(v[1:])
        elif v is not None and f in spec.globs:
            v = canonical_path(v, cwd) or v
            globs.append(v)
        canon_flags.append((f, v))
    canon_flags.sort(key=lambda fv: (fv[0], fv[1] or ""))
    pattern: str | None = None
    if spec.search and operands and not any(f in spec.no_pattern for f, _ in flags):
        pattern = pattern_words(operands.pop(0))
        patterns.insert(0, pattern)
    canon_ops = [canonical_path(o, cwd) or o for o in operands]
    key, text = part.key, part.text
    key.extend(head)
    key.extend(f if v is None else f + "\x00" + v for f, v in canon_flags)
    key.append("\x02")
    if pattern is not None:
        key.append("\x01" + pattern)
    key.extend(canon_ops)
    text.extend(render(w) for w in head)
    for f, v in canon_flags:
        if v is None:
            text.append(f)
        else:
            v = " ".join(map(render, v.lstrip("\x01").split("\x00")))  # fd -x: its words
            text.append(f + "=" + v if f.startswith("--") else f + " " + v)
    if pattern is not None:
        text.append(render(pattern))
    text.extend(render(o) for o in canon_ops)
    if patterns:
        part.pattern = " | ".join(patterns)
    part.paths.extend(
        _join(base, w, o, cwd) for w, o in zip(operands, canon_ops, strict=True) if o != "-"
    )
    part.paths.extend(globs)


def shell(command: str, cwd: str | None, rules: Rules) -> Shell:
    """The operation, canonical words, context, paths and programs of a shell command."""
    text = stripped(command)
    tokens = plain_tokens(text)
    return read_tokens(tokens, cwd, rules) if tokens is not None else read_text(text, cwd, rules)


def read_text(text: str, cwd: str | None, rules: Rules) -> Shell:
    """``shell`` of a stripped command that is not plain words (section 3.2's verbatim cases).

    An editor command of an agent-computer interface (``edit 5:5``, its text, ``end_of_edit``)
    keeps its text verbatim, indentation included; a command the shell cannot parse (an
    unquoted ``(``, an unclosed quote) compares verbatim, since its words are not known.
    """
    body = RX.body.fullmatch(text) if "\nend_of_" in text else None
    if body is not None:
        head = tokenize(body.group(1))
        words = head[0][1] if head and isinstance(head[0], tuple) and head[0][0] == "w" else ""
        if rules.programs.get(words, _NO_PROGRAM).body and not unparsable(head):
            op, params, context, paths, programs, parts = read_tokens(head, cwd, rules)
            text = strip_line_ends(body.group(2) or "")
            return op, params + "\x1e" + dumps_items([text]), context, paths, programs, parts
    tokens = tokenize(text)
    reading = read_tokens(tokens, cwd, rules)
    if not unparsable(tokens):
        return reading
    op, _, _, paths, programs, parts = reading
    text = strip_line_ends(text)
    return op, dumps_items(["\x1e", text]), text, paths, programs, parts


def read_tokens(tokens: list[Token], cwd: str | None, rules: Rules) -> Shell:
    """``shell`` of a command already split into tokens."""
    cmds = commands(tokens)
    if len(cmds) == 1 and not cmds[0].redirs and cmds[0].sep in ("", ";"):
        script = shell_script(cmds[0].words)
        if script is not None:
            return shell(script, cwd, rules)
    items: list[Any] = []
    rendered: list[str] = []
    base: str | None = None
    start = 0
    while (
        start < len(cmds) - 1
        and cmds[start].sep in ("&&", ";")
        and not cmds[start].redirs
        and 1 <= len(cmds[start].words) <= 2
        and cmds[start].words[0] == "cd"
    ):
        words = cmds[start].words
        target = words[1] if len(words) == 2 else "~"
        ct = canonical_path(target, cwd) or target
        start += 1
        if ct == ".":
            continue
        items += [["cd", ct], cmds[start - 1].sep]
        rendered.append(f"cd {render(ct)} {cmds[start - 1].sep} ")
        # a directory unknown here stays in the paths (``~/a.py``, not ``a.py``); ``cd -`` is
        # bash's ``cd "$OLDPWD"``
        base = _join(base, target, "$OLDPWD" if ct == "-" else ct, cwd)
    op = "bash"
    programs: list[str] = []
    parts: list[tuple[str, str]] = []
    paths: list[str] = []
    pattern: str | None = None
    for cmd in cmds[start:]:
        part = _analyse(cmd, cwd, base, rules)
        op = _higher(op, part.op)
        if part.program is not None and part.program not in programs:
            programs.append(part.program)
        parts.append((part.program or "", part.op))
        paths.extend(part.paths)
        if pattern is None:
            pattern = part.pattern
        items.append(part.key)
        rendered.append(" ".join(part.text))
        if cmd.sep:
            items.append(cmd.sep)
            rendered.append("; " if cmd.sep == ";" else f" {cmd.sep} ")
    words_text = "".join(rendered).strip()
    ordered = list(dict.fromkeys(p for p in paths if p))
    if op == "grep" and (pattern is not None or ordered):
        context = (pattern or "") + ("@" + " ".join(ordered) if ordered else "")
    elif op in ("read", "edit", "list") and ordered:
        context = " ".join(ordered)
    else:
        context = words_text
    return op, dumps_items(items), context, ordered, tuple(programs), tuple(parts)
