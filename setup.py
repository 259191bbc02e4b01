"""setuptools entry point: only here to build the cffi extension (csrc/)."""

from setuptools import setup

setup(cffi_modules=["csrc/build_native.py:ffibuilder"])
