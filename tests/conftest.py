import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLE_LOGS = ROOT / "sample_logs"


@pytest.fixture
def store_dir(tmp_path):
    return tmp_path / "store"


def pytest_configure(config):
    os.environ.setdefault("LOGLENS_STORE", str(Path(config.rootpath) / ".pytest-default-store-unused"))
