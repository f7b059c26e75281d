"""The operator's console: what the dashboard's pages read beyond the core API.

``index`` keeps each session's summary as the audit log records it (read incrementally, so it
survives a restart and covers hook, library and demo sessions); ``views`` makes the sessions
list, one session's steps and loop, and the fleet page from it; ``people`` logs who stopped or
told a session what; ``metrics`` is ``/metrics``; ``routes`` serves them all, with ``/docs``
(``reference.html``, drawn from ``/openapi.json`` in the page) and ``/v1/whoami``.
"""
