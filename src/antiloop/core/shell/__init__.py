"""Reading a shell command: what it runs, on what, with which words.

``tokens`` splits it into words as bash does; ``engine`` reads the words by the rows of
``antiloop.core.rules.programs``; ``shapes`` remembers the engine's reading of a command's
shape.
"""
