"""compgen: a small JAX library companion to "Discovering modular solutions that generalize
compositionally" (Schug et al., ICLR 2024)."""

__version__ = "0.1.0"
