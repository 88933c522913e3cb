"""The `loglens` command.  One module per command in this package; each module defines
`register(app)`, and is picked up here, so adding a command touches one new file."""

from __future__ import annotations

import gc

# The command's imports (polars, pyarrow, typer, pydantic) build ~100k objects that live as
# long as the process: the cycle collector ran ~120 times over them while they loaded (~35 ms
# of a ~0.3 s start) and would keep walking them.  It is paused while they load, and what
# they built is then set aside (`gc.freeze`) so later collections skip it.
gc.disable()

import importlib  # noqa: E402
import pkgutil  # noqa: E402

import typer  # noqa: E402

app = typer.Typer(
    name="loglens",
    help="Parse LLM-server logs into a Parquet store and explain why bench_serving and the server disagree.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """Parse LLM-server logs into a Parquet store and explain why bench_serving and the server disagree."""


_ORDER = ["ingest", "summary", "runs", "reconcile", "diagnose", "tail", "dashboard"]


def _register_all() -> None:
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and m.name != "common"]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_all()
gc.freeze()
gc.enable()


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # output piped into `head` and the like
        from loglens.cli.common import quiet_broken_pipe

        try:
            quiet_broken_pipe()
        except typer.Exit:
            pass
