"""YAML goes through libyaml's C loader where PyYAML has it, with the same limits and located errors as the
pure-Python loader (both paths run every check here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generator.specs.documents as documents
from generator.errors import GenRepoError, json_pointer
from generator.number_limits import INT_MAX, INT_MIN
from generator.specs.documents import MAX_DOCUMENT_VALUES, MAX_NESTING, MAX_YAML_ALIASES, load_document, yaml_loader
from tests.requirements import require
from tests.strategies import alias_bomb, json_paths, json_text

needs_libyaml = pytest.mark.requires("libyaml")


@pytest.fixture(params=["libyaml", "python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the C loader (where present) and with the pure-Python one."""
    if request.param == "libyaml":
        require("libyaml")
    monkeypatch.setattr(documents, "PREFER_LIBYAML", request.param == "libyaml")
    return str(request.param)


@needs_libyaml
def test_the_c_loader_is_used_when_present() -> None:
    assert yaml_loader() is yaml.CSafeLoader
    assert issubclass(yaml_loader(), yaml.cyaml.CParser)


def test_the_python_loader_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "PREFER_LIBYAML", False)
    assert issubclass(yaml_loader(), yaml.SafeLoader) and not issubclass(yaml_loader(), yaml.cyaml.CParser)


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "doc.yaml"
    path.write_text(text, encoding="utf-8")
    return load_document(path)


def _problem(tmp_path: Path, text: str, pointer: str = "") -> str:
    with pytest.raises(GenRepoError) as caught:
        _load(tmp_path, text)
    (problem,) = caught.value.problems
    assert problem.file == str(tmp_path / "doc.yaml") and problem.pointer == pointer
    return problem.message


def test_documents_load_the_same(loader: str, tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "examples" / "gen-repo.yaml").read_text(encoding="utf-8")
    text += "extra: &base {a: 1, b: [1.5, 'x', null, true]}\nmerged: {<<: *base, c: 2}\n"
    assert _load(tmp_path, text) == yaml.load(text, Loader=yaml.SafeLoader)


def test_alias_budget(loader: str, tmp_path: Path) -> None:
    many = "a: &x 1\nb: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    assert f"more than {MAX_YAML_ALIASES} YAML aliases" in _problem(tmp_path, many)
    enough = "a: &x 1\nb: [" + ", ".join(["*x"] * MAX_YAML_ALIASES) + "]\n"
    assert _load(tmp_path, enough) == {"a": 1, "b": [1] * MAX_YAML_ALIASES}
    # A merge key is an alias too, and a '*' inside a string is none.
    merges = "a: &x {k: 1}\n" + "".join(f"m{i}: {{<<: *x}}\n" for i in range(MAX_YAML_ALIASES + 1))
    assert "YAML aliases" in _problem(tmp_path, merges)
    assert _load(tmp_path, "glob: '*.json'\nstar: a*b\n") == {"glob": "*.json", "star": "a*b"}


def test_alias_bomb_and_value_budget(loader: str, tmp_path: Path) -> None:
    assert f"more than {MAX_DOCUMENT_VALUES} values" in _problem(tmp_path, alias_bomb())


@pytest.mark.parametrize("levels", [MAX_NESTING + 2, 1_200, 100_000])
def test_nesting_limit(loader: str, tmp_path: Path, levels: int) -> None:
    text = "[" * levels + "]" * levels
    assert _problem(tmp_path, text) == f"document nests deeper than {MAX_NESTING} levels"


def test_nesting_within_the_limit(loader: str, tmp_path: Path) -> None:
    value: object = 1
    for _ in range(MAX_NESTING):
        value = [value]
    assert _load(tmp_path, "[" * MAX_NESTING + "1" + "]" * MAX_NESTING) == value


@pytest.mark.parametrize(("text", "where"), [
    ("a: [1, 2\nb: 3\n", "at line 2 column 2"),
    ("a: 1\n  b: 2\n", "at line 2 column 4"),
    ("a: *nowhere\n", "at line 1 column 4"),
    ("a: !!python/object/apply:os.system ['true']\n", "at line 1 column 4"),
    ("a: 1\n---\nb: 2\n", "at line 2 column 1"),
    ("a: .nan\n", None),
])
def test_errors_are_located_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                                     where: str | None) -> None:
    """Both loaders report a broken document at the same line and column."""
    messages = {}
    for prefer in ([True, False] if yaml.__with_libyaml__ else [False]):
        monkeypatch.setattr(documents, "PREFER_LIBYAML", prefer)
        messages[prefer] = _problem(tmp_path, text, "/a" if where is None else "")
    for message in messages.values():
        if where is None:  # a number past the float limit, at its pointer (generator/number_limits.py)
            assert message.startswith("number .nan is past the float limit") and "(line 1 column 4)" in message
        else:
            assert message.startswith(f"invalid YAML {where}: "), message


#: JSON values YAML can read back from JSON text: PyYAML refuses the surrogate-pair escapes json writes above U+FFFF.
_BMP_TEXT = st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=4)
_YAML_JSON = st.recursive(st.none() | st.booleans() | st.integers(INT_MIN, INT_MAX) | _BMP_TEXT,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_BMP_TEXT, inner, max_size=3),
                          max_leaves=20)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), document=st.dictionaries(_BMP_TEXT, _YAML_JSON, max_size=4))
def test_a_key_twice_in_one_mapping_is_refused_at_its_pointer(tmp_path: Path, loader: str, data: st.DataObject,
                                                               document: dict) -> None:
    """PyYAML keeps the last of two equal keys silently; gen-repo refuses them as its JSON reader does (issue 37):
    a key planted twice in a random mapping (JSON text is YAML) is refused with its pointer, by both loaders."""
    objects = [(path, value) for path, value in json_paths(document) if isinstance(value, dict)]
    path, value = data.draw(st.sampled_from(objects))
    key = data.draw(st.sampled_from(sorted(value))) if value and data.draw(st.booleans()) else data.draw(_BMP_TEXT)
    file = tmp_path / "doc.yaml"
    file.write_text(json_text(document, path, ("duplicate", key)), encoding="utf-8")
    with pytest.raises(GenRepoError) as caught:
        load_document(file)
    assert [p.pointer for p in caught.value.problems] == [json_pointer([*path, key])]
    assert "appears more than once in one mapping (line 1 column" in caught.value.problems[0].message


def test_merge_keys_and_equal_values_of_different_types_are_not_duplicates(tmp_path: Path, loader: str) -> None:
    assert _load(tmp_path, "base: &b {x: 1}\nm:\n  <<: *b\n  x: 2\n'1': a\n1: b\n") == {
        "base": {"x": 1}, "m": {"x": 2}, "1": "a", 1: "b"}
