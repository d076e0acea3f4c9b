"""sftraffic's event store. The version is declared once, in pyproject.toml."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("sftraffic")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        import tomllib  # noqa: PLC0415
        from pathlib import Path  # noqa: PLC0415

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()
