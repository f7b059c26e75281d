"""What antiloop knows, as rows: data, not code.

``programs``: programs, wrappers and runners, read for the procedure (protocol section 3).
``readings``: test runners' summaries, error lines and scrubbers, read for the result (section 4).
``ruleset``: the one ``Rules`` holding both, ``BUILTIN``, and ``load_rules`` for a config's rows.
A new program or a new scrubber is a row in ``programs`` or ``readings``; a config adds rows of
the same kinds, to its own rule set only. The engines that read the rows are ``shell/``, ``text/``.
"""
