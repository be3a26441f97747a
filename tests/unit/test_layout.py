"""The house rules that the code's layout can be checked for: no module over 450 lines."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
LONGEST = 450  # lines a module may have: one that grows past it holds more than one job


def modules():
    """The project's modules: the stages' packages (each folder with an __init__.py: gptkit/, train/,
    ...) and bench/'s, every one but the tests' own."""
    folders = [p.parent for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"] + [ROOT / "bench"]
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def lines(path):
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_450_lines():
    found = modules()
    assert ROOT / "train" / "recipe" / "ladder.py" in found and ROOT / "bench" / "recipe.py" in found
    longer = [f"{path.relative_to(ROOT)}: {lines(path)}" for path in found if lines(path) > LONGEST]
    assert not longer, f"over {LONGEST} lines (split it, one job a module):\n" + "\n".join(longer)
