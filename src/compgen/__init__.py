"""compgen: a small JAX library companion to "Discovering modular solutions that generalize
compositionally" (Schug et al., ICLR 2024)."""

__version__ = "0.1.0"

# Float32 products at the backend's default precision unless $COMPGEN_MATMUL_PRECISION asks for another; only then
# does this import touch JAX (compgen.precision). Every process that imports compgen reads it, workers included.
from compgen import precision as _precision  # noqa: E402

_precision.apply_at_import()
