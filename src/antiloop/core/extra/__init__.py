"""The opt-in detectors: repeats that the steps in between hide.

``detectors`` holds them; ``edits`` tells what an edit step did, over the shape of source text
that ``code_shape`` reduces it to. A new opt-in detector goes here, its name into the config's
``detectors`` and its construction into ``antiloop.defaults.opt_in_detectors``.
"""
