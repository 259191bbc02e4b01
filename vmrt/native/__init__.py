"""Native modules written in Python (and, through cffi shims, in C)."""

from vmrt.native.module import NativeModule, export

__all__ = ["NativeModule", "export"]
