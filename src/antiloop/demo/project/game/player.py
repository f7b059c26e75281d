"""The player of a tiny platformer."""

from game.config import GRAVITY, JUMP_HEIGHT


class Player:
    """A player that walks, jumps and double-jumps."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.jumps_left = 2

    def walk(self, dx: int) -> None:
        self.x += dx

    def jump(self) -> None:
        if self.jumps_left == 0:
            return
        self.y += JUMP_HEIGHT
        self.jumps_left -= 1

    def doubleJump(self) -> None:  # the bug report is about this one
        self.jump()
        self.jump()

    def land(self) -> None:
        self.y = max(0, self.y - GRAVITY)
        if self.y == 0:
            self.jumps_left = 2
