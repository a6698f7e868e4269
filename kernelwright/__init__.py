"""kernelwright: verified GPU kernels from PyTorch reference programs."""
__version__ = "0.1.0"
