"""Every regular expression a test builds from a value escapes that value.

A device, backend or dtype name pasted into a pattern is read as regex syntax: PoCL calls an
Intel CPU ``pthread-Intel(R) Xeon(R) Processor``, whose parentheses are groups, so the right
message stopped matching on that machine alone. This check reads the test sources: a value
interpolated into ``match=`` or into the pattern of ``re.search`` / ``re.match`` /
``re.fullmatch`` / ``re.compile`` / ``re.findall`` must be ``re.escape(...)``-d, or formatted
as an integer (``{n:d}``, which fails on anything else). A value that is a regular expression by
contract (a line of ``asv_bench/quick.txt``, which asv reads as one) says so on its line:
``# regex by contract``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEST_SOURCES = sorted(
    {
        *ROOT.glob("tests/**/*.py"),
        *ROOT.glob("backends/*/tests/**/*.py"),
        *ROOT.glob("examples/**/tests/**/*.py"),
        *ROOT.glob("polymm/testing/**/*.py"),
    }
)
RE_FUNCTIONS = {"search", "match", "fullmatch", "compile", "findall", "finditer"}


def _escaped(node: ast.AST) -> bool:
    """A pattern part that cannot carry regex syntax by accident."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "escape":
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _escaped(node.left) and _escaped(node.right)
    if isinstance(node, ast.JoinedStr):
        return all(_escaped(part) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        spec = node.format_spec
        as_int = isinstance(spec, ast.JoinedStr) and [getattr(v, "value", None) for v in spec.values] == ["d"]
        return as_int or _escaped(node.value)
    return False


def unescaped_patterns(source: str) -> list[tuple[int, str]]:
    """(line, pattern source) of each pattern in ``source`` that interpolates an unescaped value."""
    found = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        patterns = [k.value for k in node.keywords if k.arg == "match"]
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in RE_FUNCTIONS
            and isinstance(func.value, ast.Name)
            and func.value.id == "re"
            and node.args
        ):
            patterns.append(node.args[0])
        found += [
            (p.lineno, ast.unparse(p))
            for p in patterns
            if not _escaped(p) and not lines[p.lineno - 1].rstrip().endswith("# regex by contract")
        ]
    return found


def test_the_check_sees_the_mistake_and_its_fixes():
    wrong = 'pytest.raises(E, match=f"x {name}")\nre.search(name, text)\npytest.raises(E, match=str(d))'
    assert [line for line, _ in unescaped_patterns(wrong)] == [1, 2, 3]
    right = (
        'pytest.raises(E, match=f"x {re.escape(name)} {n:d}")\n'
        're.search(re.escape(a) + "b", text)\npytest.raises(E, match=r"\\(3, 4\\)")'
    )
    assert unescaped_patterns(right) == []
    assert unescaped_patterns("re.compile(line)  # regex by contract") == []


@pytest.mark.parametrize("path", TEST_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_patterns_escape_the_values_they_interpolate(path):
    assert unescaped_patterns(path.read_text()) == [], f"{path}: escape these values with re.escape"
