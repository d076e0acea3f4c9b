"""The store's one C extension: ``framework/protocol/record_walk.py`` compiled by mypyc.

Everything else about the package is declared in ``pyproject.toml``; this file only adds the
extension, which walks every produced record (``records.check_records``) about 25x faster than
the same module run as Python. mypy (mypyc) is a build requirement (``[build-system]``);
nothing of it is needed at run time.

The install never fails for want of the extension: it goes on with the module as plain Python
(same checks, same errors, more CPU per produced record) and prints a warning (shown by
``pip install -v``; the broker logs which walk it runs at start, and ``./run`` says so) when

- ``SFTRAFFIC_PURE_PYTHON=1`` is set (to test or debug the pure-Python walk),
- mypyc cannot be imported (a ``--no-build-isolation`` install into an environment without
  mypy) or fails, or
- there is no working C compiler (``CC`` names the compiler to use, as for any extension).

The C sources are generated in ``build/mypyc/`` when ``build_ext`` runs (not for metadata or
an sdist). An editable install (``pip install -e .``) builds the extension in place, next to
the module (``framework/protocol/record_walk.cpython-*.so``, ignored by git); rebuild it after
changing ``record_walk.py`` (``./run`` reinstalls when that file changes).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

SOURCE = "framework/protocol/record_walk.py"
# what mypyc makes of a module in a package: its group's shared library and the module (a shim
# importing it)
EXTENSIONS = ["framework.protocol.record_walk__mypyc", "framework.protocol.record_walk"]
PURE_ENV = "SFTRAFFIC_PURE_PYTHON"
C_DIR = os.path.join("build", "mypyc")
# what a missing or broken compiler raises from build_extension
COMPILER_ERRORS = (CCompilerError, ExecError, PlatformError, OSError)


def warn(why: str) -> None:
    sys.stderr.write(
        f"\nWARNING (sftraffic): {why}.\n"
        f"  Installing {SOURCE} as pure Python: produce validation works the same but costs "
        "~25x the CPU per record.\n\n"
    )


class MypycBuildExt(build_ext):
    """build_ext that generates the extension's C with mypyc first and gives up without failing.

    The extensions declared in ``setup()`` are placeholders with the names mypyc gives (so that
    the wheel is platform-specific and editable installs know the in-place outputs); they take
    the sources and flags of mypyc's Extensions when the command runs, so that metadata and
    sdist builds need no mypyc. Any failure leaves no extension behind, and the module is then
    imported from its ``.py`` source.
    """

    def run(self) -> None:
        self._in_place = bool(self.inplace or getattr(self, "editable_mode", False))
        if os.environ.get(PURE_ENV, "").strip() not in ("", "0"):
            self._skip(f"{PURE_ENV} is set")
            return
        try:
            from mypyc.build import mypycify  # noqa: PLC0415 (a build requirement, only here)
        except ImportError as exc:
            self._skip(f"mypyc is not available ({exc}; it comes with mypy)")
            return
        try:
            generated = {ext.name: ext for ext in mypycify([SOURCE], target_dir=C_DIR)}
        except (Exception, SystemExit) as exc:  # mypyc exits on type errors
            self._skip(f"mypyc could not generate C for {SOURCE} ({exc!r})")
            return
        if set(generated) != {ext.name for ext in self.extensions}:
            self._skip(f"mypyc made extensions {sorted(generated)}, not the {EXTENSIONS} expected")
            return
        # the placeholders keep what finalize_options set on them and take mypyc's sources/flags
        for ext in self.extensions:
            for attr in ("sources", "include_dirs", "extra_compile_args", "extra_link_args", "depends"):
                setattr(ext, attr, list(getattr(generated[ext.name], attr)))
        try:
            super().run()
        except COMPILER_ERRORS as exc:
            self._skip(f"the C compiler failed ({exc})")

    def _skip(self, why: str) -> None:
        """Warn, and remove what was built (or is left from an earlier build): a module shim
        without its shared library would not import, an older build would hide the source."""
        warn(why)
        build_py = self.get_finalized_command("build_py")
        for name in EXTENSIONS:
            filename = self.get_ext_filename(name)
            stale = [os.path.join(self.build_lib, filename)]
            if self._in_place:
                package_dir = build_py.get_package_dir(name.rpartition(".")[0])
                stale.append(os.path.join(package_dir, os.path.basename(filename)))
            for path in stale:
                if os.path.exists(path):
                    os.remove(path)
        self.extensions = []


setup(
    ext_modules=[Extension(name, sources=[SOURCE]) for name in EXTENSIONS],
    cmdclass={"build_ext": MypycBuildExt},
)
