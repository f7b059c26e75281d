"""The pure core: standard library only, no I/O, no store, no person, no embedder.

A step flows through it as the protocol asks its questions: what did the step do
(``step``, ``procedure``, ``forms``), what did it give (``result``), what came before
(``history``, ``deferred``), and what now (``decide``, ``detectors``, ``semantic``, ``verdict``,
``fingerprint``). ``redact`` and ``errors`` serve them all. The rows it reads by
are one ``Rules`` (``rules.ruleset``), passed in: the ``Policy`` carries them.

The rooms a reader of the spine can skip: ``rules/`` (what antiloop knows, as rows),
``shell/`` (reading a shell command), ``text/`` (reading texts), ``extra/`` (the opt-in
detectors). How results compare, runs and streaks go in ``decide``; a detector in
``detectors``; nothing here imports outside ``antiloop.core`` (``tests/test_imports.py``).
"""
