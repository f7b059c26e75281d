"""The operator's console: what the dashboard's pages read beyond the core API.

``index`` keeps each session's summary as the audit log records it (read incrementally, so it
survives a restart and covers hook, library and demo sessions); ``routes`` serves the sessions
list with its filters and counts, one session's steps and loop, the fleet page, ``/metrics``
(``metrics``), ``/docs`` (``reference``) and who the caller is.
"""
