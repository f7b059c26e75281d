"""Reading texts: results and final messages.

``engine`` compiles the rows of ``antiloop.core.rules.readings`` (scrubbing, error lines,
summaries); ``cues`` finds the signals of a final message; ``stagnation`` tells a counter from a
measure and scores a stall.
"""
