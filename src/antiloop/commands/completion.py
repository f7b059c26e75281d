"""``antiloop completion bash|zsh|fish``: a shell completion script for the commands and options.

Install: ``antiloop completion bash > ~/.local/share/bash-completion/completions/antiloop``;
zsh: ``antiloop completion zsh > "${fpath[1]}/_antiloop"``; fish:
``antiloop completion fish > ~/.config/fish/completions/antiloop.fish``. The script is made from
the command line's own parsers, so it lists exactly the commands and options there are.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop completion``."""
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(handler=run)


def options() -> dict[str, tuple[str, list[str]]]:
    """For each command: its one-line help and its long options, from its parser."""
    from antiloop.cli import COMMANDS, build_parser

    out: dict[str, tuple[str, list[str]]] = {}
    for name, (_, help_text) in COMMANDS.items():
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
            name
        ]
        flags = sorted({o for a in sub._actions for o in a.option_strings if o.startswith("--")})
        out[name] = (help_text, flags)
    return out


def bash_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Completion for bash (and zsh through bashcompinit)."""
    cases = "".join(
        f'    {name}) opts="{" ".join(flags)}" ;;\n' for name, (_, flags) in commands.items()
    )
    return (
        "_antiloop() {\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" opts=""\n'
        '  if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'    COMPREPLY=($(compgen -W "{" ".join(commands)} --help --version" -- "$cur"))\n'
        "    return\n"
        "  fi\n"
        '  case "${COMP_WORDS[1]}" in\n'
        f"{cases}"
        "  esac\n"
        '  if [[ "$cur" == -* ]]; then\n'
        '    COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))\n'
        "  else\n"
        '    COMPREPLY=($(compgen -f -- "$cur"))\n'
        "  fi\n"
        "}\n"
        "complete -o filenames -F _antiloop antiloop\n"
    )


def zsh_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Completion for zsh, through zsh's own bash-completion bridge."""
    return "#compdef antiloop\nautoload -U +X bashcompinit && bashcompinit\n" + bash_script(
        commands
    )


def fish_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Completion for fish: commands with their help, then each command's options."""
    names = " ".join(commands)
    lines = ["complete -c antiloop -f"]
    first = f"'not __fish_seen_subcommand_from {names}'"
    for name, (help_text, flags) in commands.items():
        text = help_text.replace("'", "\\'")
        lines.append(f"complete -c antiloop -n {first} -a {name} -d '{text}'")
        after = f"'__fish_seen_subcommand_from {name}'"
        lines.extend(f"complete -c antiloop -n {after} -l {flag[2:]}" for flag in flags)
    return "\n".join(lines) + "\n"


def run(ns: argparse.Namespace) -> int:
    """Print the script."""
    commands = options()
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[ns.shell](commands)
    print(script, end="")
    return 0
