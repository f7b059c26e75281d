"""Reading texts: results and final messages.

``engine`` compiles the rows of a rule set (``antiloop.core.rules.readings``: scrubbing, error
lines, summaries), one engine per set; ``cues`` finds the signals of a final message;
``stagnation`` tells a counter from a measure and scores a stall; ``patterns`` compiles regexes
on first use; ``suggest`` names the near name of a mistyped one. A new volatile value or error
line is a row in ``rules``, not code here.
"""
