"""The CLI (cli/tbverbs) loaded as a module, or run as a program: shared by the CLI's tests and
the packaging tests."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI_PATH = REPO / "cli" / "tbverbs"


def load_cli():
    loader = importlib.machinery.SourceFileLoader("tbverbs_cli", str(CLI_PATH))
    spec = importlib.util.spec_from_loader("tbverbs_cli", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def run_cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CLI_PATH), *argv], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)
