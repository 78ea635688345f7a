"""Compile lowbit_consumer/_ternary.pyx against the installed pylowbit."""
import pylowbit
from Cython.Build import cythonize
from setuptools import Extension, setup

ext = Extension(
    "lowbit_consumer._ternary", ["lowbit_consumer/_ternary.pyx"],
    include_dirs=[pylowbit.get_include()],
    library_dirs=pylowbit.get_library_dirs(),
    runtime_library_dirs=pylowbit.get_library_dirs(),  # the shared liblowbit inside pylowbit
    libraries=["lowbit"],
)
setup(packages=["lowbit_consumer"], ext_modules=cythonize([ext], language_level=3))
