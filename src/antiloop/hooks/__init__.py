"""antiloop inside coding agents: Claude Code, Gemini CLI and Codex CLI hooks.

Each agent runs ``antiloop hook <agent>`` as a fresh process per event, with the event's JSON
on stdin; the answer is JSON on stdout. One normaliser turns the three dialects into a
``HookEvent``; one handler judges it with the Guard; one renderer speaks each dialect back::

    antiloop hook claude-code < payload.json      # what Claude Code runs
    antiloop install claude-code --user           # merges the hook entries into settings.json
    antiloop doctor                               # checks the installation end to end

Modules: ``events`` (normaliser, stdlib only), ``handler`` (the guard's side), ``render`` (the
answers), ``runner`` (deadline and fail-safe), ``installer``, ``doctor``, ``transcripts``.
Importing this package imports nothing else: the hook path starts a process per tool call.
"""

from __future__ import annotations

__all__: list[str] = []
