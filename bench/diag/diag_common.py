"""Helpers shared by the diagnostics in bench/diag (run from the repository root)."""
import importlib.util


def load(path, name):
    """Imports a task or candidate file as a module named `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
