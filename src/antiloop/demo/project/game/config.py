"""Tuning values of the game."""

GRAVITY = 1
JUMP_HEIGHT = 1  # the designers want 2
