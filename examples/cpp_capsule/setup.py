"""A C++ extension that reaches pylowbit's kernels through its capsule (no link against liblowbit)."""
import pylowbit
from setuptools import Extension, setup

setup(
    name="lowbit-capsule-user", version="0.1.0",
    ext_modules=[Extension("lowbit_capsule_user", ["lowbit_capsule_user.cpp"],
                           include_dirs=[pylowbit.get_include()], language="c++",
                           extra_compile_args=["-std=c++17"])],
)
