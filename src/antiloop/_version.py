"""The version of antiloop, in a module of its own: any module may import it, cycle-free."""

__version__ = "0.1.0"
