"""setuptools entry for the compiled part: everything else is in pyproject.toml."""

from setuptools import setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 74 vendors distutils errors here; older ones re-export distutils'
    from setuptools.errors import CCompilerError, CompileError, LinkError
except ImportError:  # pragma: no cover
    from distutils.errors import CCompilerError, CompileError, LinkError  # type: ignore[no-redef]

HINT = """
koord-native could not compile its cffi extension ({err}). It needs a C compiler and the Python headers
(Debian/Ubuntu: apt-get install gcc python3-dev; Fedora: dnf install gcc python3-devel). The rest of koord
works without it: the Resctrl QoS strategy then reports itself unsupported on this node.
""".strip()


class BuildExt(build_ext):
    """Say what is missing when the compiler fails, instead of only the compiler's own output."""

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, CompileError, LinkError) as err:
            raise SystemExit(HINT.format(err=err)) from None


setup(cffi_modules=["build_ffi.py:ffibuilder"], cmdclass={"build_ext": BuildExt})
