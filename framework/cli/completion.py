"""``sftraffic completion bash|zsh|fish``: the shell code that completes sftraffic's commands.

Completion runs through argcomplete: the shell calls ``sftraffic`` itself to ask what may
follow, so the completions always match the installed commands and their options.
"""

from __future__ import annotations

import argparse

from framework.errors import StoreError

SHELLS = ("bash", "zsh", "fish")

EPILOG = """\
example:
  sftraffic completion bash > ~/.local/share/bash-completion/completions/sftraffic
  sftraffic completion zsh > "${fpath[1]}/_sftraffic"
  sftraffic completion fish > ~/.config/fish/completions/sftraffic.fish"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "completion",
        help="print shell completion code (bash, zsh, fish)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import argcomplete  # noqa: PLC0415
    except ImportError:
        raise StoreError("completion needs argcomplete: pip install argcomplete") from None
    print(argcomplete.shellcode(["sftraffic"], shell=args.shell), end="")  # type: ignore[attr-defined]
    return 0
