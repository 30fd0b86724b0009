"""setuptools entry for the compiled part: everything else is in pyproject.toml."""

from setuptools import setup

setup(cffi_modules=["build_ffi.py:ffibuilder"])
