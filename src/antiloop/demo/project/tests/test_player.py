import unittest

from game.player import Player


class PlayerTest(unittest.TestCase):
    def test_walk(self):
        p = Player()
        p.walk(3)
        self.assertEqual(p.x, 3)

    def test_jump_height(self):
        p = Player()
        p.jump()
        self.assertEqual(p.y, 2)

    def test_double_jump_height(self):
        p = Player()
        p.doubleJump()
        self.assertEqual(p.y, 4)

    def test_land(self):
        p = Player()
        p.land()
        self.assertEqual(p.y, 0)


if __name__ == "__main__":
    unittest.main()
