"""Reading a shell command: what it runs, on what, with which words.

``tokens`` splits it into words as bash does; ``engine`` reads the words by the rows of a rule
set (``antiloop.core.rules``); ``shapes`` is the entry ``procedure_of`` calls: it remembers the
engine's reading of a command's shape, per rule set, privately. A new program is a row, not code
here; a new shell syntax goes in ``tokens``, a new way of reading arguments in ``engine``.
"""
