import subprocess
import sys

import accord


def test_all_is_honest() -> None:
    public = {name for name in dir(accord) if not name.startswith("_")}
    assert set(accord.__all__) <= public
    modules = {"models", "determinism", "backends", "run", "ledger", "cli", "serve", "integrations", "read", "schema", "prompt", "vote", "observe"}  # public modules and the role folders
    assert public - set(accord.__all__) - modules == set()


def test_importing_accord_does_not_import_heavy_dependencies() -> None:
    code = "import sys, accord; print(sorted(m for m in ('torch', 'transformers', 'outlines', 'openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_error_tree() -> None:
    for name in ("InvalidOutput", "NoConsensus", "BudgetExceeded"):
        assert issubclass(getattr(accord, name), accord.OutputError)
    for name in ("BackendError", "UnsupportedSchema", "ModelNotInstalled", "ConfigError", "LedgerError", "OutputError"):
        assert issubclass(getattr(accord, name), accord.AccordError)
    assert accord.BackendError("x", retryable=True).retryable
