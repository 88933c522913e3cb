"""Options and error handling shared by every command (defined once, here)."""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.console import Console

from loglens.store import Store

StoreOption = Annotated[
    Optional[str],
    typer.Option(
        "--store",
        envvar="LOGLENS_STORE",
        help="Store directory (default: $LOGLENS_STORE, else .loglens in the working directory).",
        show_envvar=True,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of the terminal report.")]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class UserError(Exception):
    """A problem with the user's input: printed as one `Error: ...` line, exit 1 (or `code`)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"Error: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


def open_store(store: Optional[str], must_exist: bool = True) -> Store:
    st = Store(store)
    if must_exist and not st.exists():
        fail(f"no loglens store at {st.path}; run `loglens ingest LOG` first, or pass --store DIR.")
    return st


def print_json(obj: Any, indent: int | None = 2) -> None:
    try:
        sys.stdout.write(json.dumps(obj, indent=indent, default=str, allow_nan=False) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_broken_pipe()


def quiet_broken_pipe() -> NoReturn:
    """The reader went away (`| head`): stop quietly, as command-line tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def progress_enabled() -> bool:
    """Progress bars only on a terminal."""
    return sys.stderr.isatty()


def guarded(command, name: str):
    """`command` with any unexpected failure turned into one `Error:` line (exit 1), never a
    traceback; usage errors, exits and Ctrl-C pass through."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            quiet_broken_pipe()
        except Exception as e:  # a bug or data we did not foresee: say what, briefly
            fail(f"{name} failed: {type(e).__name__}: {e}. Please report this with the log that caused it.")

    return run
