"""What antiloop knows, as rows: data, not code.

``programs``: programs, wrappers and runners, read for the procedure (protocol section 3).
``readings``: test runners, error lines and scrubbers, read for the result (section 4).
A new program or a new scrubber is a row here; a config adds rows of the same kinds.
"""
