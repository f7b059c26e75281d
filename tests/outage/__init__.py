"""Tests of ``antiloop.outage``: settings, retries and the journal (no store server needed)."""
