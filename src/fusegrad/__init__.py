"""fusegrad: reverse-mode AD for NumPy code that keeps elementwise and broadcast work lazy and fused."""

__version__ = "0.1.0"
