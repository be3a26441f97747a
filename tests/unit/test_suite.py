"""The test suite itself: no test is lost to a second definition of its name (Python keeps the last
one silently, and pytest runs only that), and every GPU test is where make gpu-check looks for them."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/, both tiers and what is beside them


def redefinitions(source, path="<source>"):
    """`path:line: name` of each function or class defined again in the same scope (module or class
    body, and the blocks of an `if`, `try`, `with` or loop in it, which run in that scope; the
    branches of an `if` or `try` are alternatives, so a name in two of them is no redefinition)."""
    found = []

    def scan(body, seen):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in seen:
                    found.append(f"{path}:{node.lineno}: {node.name} (first defined at line {seen[node.name]})")
                seen[node.name] = node.lineno
                if isinstance(node, ast.ClassDef):
                    scan(node.body, {})
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                branches = [node.body, getattr(node, "orelse", []), *(h.body for h in getattr(node, "handlers", []))]
                after = {}
                for branch in branches:
                    each = dict(seen)
                    scan(branch, each)
                    after.update(each)
                seen.update(after)
                scan(getattr(node, "finalbody", []), seen)

    scan(ast.parse(source).body, {})
    return found


def test_no_test_file_defines_a_name_twice():
    found = [
        line
        for path in sorted(TESTS.rglob("*.py"))
        for line in redefinitions(path.read_text(encoding="utf-8"), path.relative_to(TESTS.parent))
    ]
    assert not found, "defined again, hiding the first:\n" + "\n".join(found)


def test_a_redefinition_is_found_in_a_module_and_a_class_but_not_across_scopes_or_branches():
    source = """
def test_a(): pass
def helper(): pass
class TestB:
    def test_c(self): pass
    def test_c(self): pass
    def test_a(self): pass
if True:
    def fast(): pass
else:
    def fast(): pass
def helper(): pass
def test_a(): pass
"""
    assert redefinitions(source, "t.py") == [
        "t.py:6: test_c (first defined at line 5)",
        "t.py:12: helper (first defined at line 3)",
        "t.py:13: test_a (first defined at line 2)",
    ]


def test_every_gpu_test_is_in_tests_gpu():
    # make gpu-check runs `pytest -m gpu tests/gpu` alone: a GPU machine may lack the clients that
    # other modules import (bench/gpu_rows_verdicts.py), so a gpu test elsewhere would never run there.
    elsewhere = [
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.parent.name != "gpu" and re.search(r"pytest\.mark\.gpu\b", path.read_text(encoding="utf-8"))
    ]
    assert not elsewhere, elsewhere
