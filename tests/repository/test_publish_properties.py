"""``publish`` and its release gate against generated version-folder names and bucket states (hypothesis), on the
loopback S3 server and the GCS emulator the suite already runs (one of each per session, tests/object_stores.py), and
on a folder (a publish to a shared folder, issue 38; its "bucket state" is the same files written as files).

Each example writes a bucket state object by object (tests/bucket_states.py: the example models at version 1, the
configs pinned or as built, the lock file as published, missing, without ``version`` or partial, folders gen-repo did
not make, an empty version folder) and publishes a local repository to it: the example models again, their breaking
rebuild, or the example models with text's version folder renamed to a generated name (digits, leading zeros,
whitespace and newlines around them, signs, Unicode digits, past int64, very long). Invariants:

- a refusal is located (every problem names an object of the bucket or a file of the local repository) and changes
  nothing in the bucket (every object's bytes, the configs and the lock file included, are as before);
- a local folder that is not exactly a version is refused (exit 2);
- a publish that succeeds leaves each model's config pinned to a version holding every file the local lock lists for
  it, with the lock's bytes (never an empty or partial version);
- no object in a folder that the bucket's lock did not list before (gen-repo did not make it) is removed or changed;
- ``gen-repo diff`` (bucket -> local) and the gate agree, both ways: without ``allow_breaking`` publish refuses when
  diff finds a breaking change, and the gate refuses only then, naming diff's models; a bucket diff finds no
  breaking change in is refused only for a renamed folder that is no version or an object the served version's
  lock does not list, and published otherwise;
- every kind of local repository, lock state and generated name is drawn (the explicit examples hold that), and
  both a publish and a gate refusal happen.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from generator.errors import GenRepoError
from generator.naming import version_folder, versioned_folder
from generator.repository.contract_sources import diff_locations
from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.publish import ReleaseRefused, publish
from tests.bucket_states import LOCK_STATES, read_lock_file, sync, with_version_folder
from tests.object_stores import Store

#: Folder names around a version: exact ones, and the ways a name reads as a number without being exactly one.
NAMES = st.one_of(
    st.integers(1, 10**6).map(str),
    st.builds(lambda zeros, n: "0" * zeros + str(n), st.integers(1, 3), st.integers(0, 999)),
    st.builds(lambda space, n, before: f"{space}{n}" if before else f"{n}{space}",
              st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\u00a0", "\u2028", "\u3000"]),
              st.integers(1, 99), st.booleans()),
    st.builds(lambda sign, n: f"{sign}{n}", st.sampled_from(["+", "-"]), st.integers(0, 99)),
    st.text(alphabet="\u0660\u0661\u0663\u0966\u09e7\uff11\uff13", min_size=1, max_size=3),
    st.integers(2**63 - 1, 10**40).map(str),
    st.text(alphabet="0123456789", min_size=60, max_size=200),
    st.builds(lambda n, tail: f"{n}{tail}", st.integers(1, 99), st.sampled_from(["abc", "e3", ".0", "_old"])),
)
#: The kinds of name NAMES draws, in its order.
NAME_KINDS = ("version", "leading zeros", "whitespace", "sign", "unicode digits", "past int64", "very long", "suffix")


def _name_kind(name: str) -> str:
    """Which branch of NAMES drew ``name``."""
    if not name.isascii():
        return "whitespace" if name.strip() != name else "unicode digits"
    if name.strip() != name:
        return "whitespace"
    if name[:1] in "+-":
        return "sign"
    if not name.isdigit():
        return "suffix"
    if len(name) >= 60:
        return "very long"
    if len(name) > 1 and name.startswith("0"):
        return "leading zeros"
    return "past int64" if int(name) >= 2**63 - 1 else "version"


#: The local repository: as built, its breaking rebuild, or with text's version folder renamed (to a NAMES name).
LOCALS = st.sampled_from(["example", "variant", "example", "variant", "renamed"])
STATES = st.fixed_dictionaries({
    "lock_state": st.sampled_from(LOCK_STATES),
    "pinned": st.booleans(),
    "foreign": st.lists(NAMES, max_size=2, unique=True),
    "empty_version": st.booleans(),
    "allow_breaking": st.booleans(),
})
_PREFIXES = itertools.count()


def _listed(lock: Any) -> set[tuple[str, int]]:
    """(model, version) folders a valid lock lists files of."""
    listed = set()
    for key in (lock or {}).get("artifacts", {}):
        held = versioned_folder(key)
        if held is not None and (version := version_folder(held[1])) is not None:
            listed.add((held[0], version))
    return listed


def _foreign(rel: str, listed: set[tuple[str, int]]) -> bool:
    """Whether the object ``rel`` lies in a version-area folder no lock listed (one gen-repo did not make)."""
    held = versioned_folder(rel)
    return held is not None and (held[0], version_folder(held[1])) not in listed


def _check_published(after: dict[str, bytes], store: Store, prefix: str, local: Path) -> None:
    """Every local model is served from a version holding every file its lock lists, with the lock's bytes."""
    lock = read_lock_file(local)
    for model in lock["models"]:
        config = after[store.key(prefix, f"{model}/config.pbtxt")].decode()
        served = int(config.split("versions:")[1].split()[0])  # publish pins exactly one version
        for key, meta in lock["artifacts"].items():
            held = versioned_folder(key)
            if held is None or held[0] != model:
                continue
            rest = key.split("/", 2)[2] if not key.startswith(f"{model}/warmup/") else key.split("/", 3)[3]
            area = "warmup/" if key.startswith(f"{model}/warmup/") else ""
            data = after[store.key(prefix, f"{model}/{area}{served}/{rest}")]
            if rest.endswith("gen_repo/contract.json"):
                assert {**json.loads(data), "version": 0} == {**json.loads((local / key).read_bytes()), "version": 0}
            else:
                assert (hashlib.sha256(data).hexdigest(), len(data)) == (meta["sha256"], meta["size"]), key


def _state(lock_state: str, foreign: list[str], *, pinned: bool = True, empty_version: bool = False,
           allow_breaking: bool = False) -> dict[str, Any]:
    return {"lock_state": lock_state, "pinned": pinned, "foreign": foreign, "empty_version": empty_version,
            "allow_breaking": allow_breaking}


#: Explicit examples: a bucket synced without a lock beside foreign folders, published over anyway; a served version
#: holding an object its lock does not list; a version folder named "1\n" (publish once uploaded it as an empty
#: version); then every lock state, local kind and kind of name at least once.
EXAMPLES: list[tuple[str, str, dict[str, Any]]] = [
    ("variant", "", _state("missing", [" 5", "7"], pinned=False, empty_version=True, allow_breaking=True)),
    ("example", "", _state("published", ["1"])),
    ("renamed", "1\n", _state("published", [])),
    ("variant", "12", _state("published", ["0042", "+3"])),
    ("example", "\u0663", _state("no version", ["9" * 25, "7_old"], pinned=False)),
    ("renamed", "0" * 70, _state("partial", ["-1"], empty_version=True)),
    ("renamed", "0012", _state("missing", ["\u0661"])),
    ("renamed", "8", _state("published", [])),
]


@pytest.mark.slow
def test_publish_and_the_gate_hold_their_invariants_on_any_bucket(
        publish_store: Store, example_repository: Path, variant_example_repository: Path) -> None:
    drawn: dict[str, set[str]] = {"local": set(), "lock": set(), "name": set(), "outcome": set()}

    @settings(max_examples=8, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(kind=LOCALS, name=NAMES, state=STATES)
    def run(kind: str, name: str, state: dict[str, Any]) -> None:
        drawn["local"].add(kind)
        drawn["lock"].add(state["lock_state"])
        drawn["name"].update(_name_kind(n) for n in [*state["foreign"], *([name] if name else [])])
        drawn["outcome"].add(_publish_once(publish_store, example_repository, variant_example_repository, kind,
                                           name, state))

    for example_kind, example_name, example_state in EXAMPLES:
        run = example(kind=example_kind, name=example_name, state=example_state)(run)
    run()
    assert drawn["local"] == {"example", "variant", "renamed"}, drawn
    assert drawn["lock"] == set(LOCK_STATES), drawn
    assert drawn["name"] == set(NAME_KINDS), drawn
    assert {"published", "gate"} <= drawn["outcome"], drawn


def _publish_once(store: Store, example_repository: Path, variant_example_repository: Path,
                  kind: str, name: str, state: dict[str, Any]) -> str:
    """Publish one local repository to one bucket state and check the invariants; how it ended."""
    if store.kind == "s3":  # moto refuses object keys with a newline
        state = {**state, "foreign": [n for n in state["foreign"] if "\n" not in n]}
    prefix = f"property-{store.kind}-{next(_PREFIXES)}"
    foreign = {f"mlp/{name}/not-gen-repos.txt": b"someone else's" for name in state["foreign"]}
    if state["empty_version"]:
        foreign["mlp/5/"] = b""  # a folder marker: an empty version folder
    sync(store, prefix, example_repository, pinned=state["pinned"], lock_state=state["lock_state"], foreign=foreign)
    url = store.url(prefix)
    before = store.snapshot(prefix)
    lock_key = store.key(prefix, LOCK_FILE_NAME)
    listed = _listed(json.loads(before[lock_key]) if lock_key in before else None)

    with tempfile.TemporaryDirectory() as tmp:
        local = {"example": example_repository, "variant": variant_example_repository}.get(kind) or \
            with_version_folder(example_repository, Path(tmp) / "repo", "text", name)
        try:
            diff_breaking: set[str] | None = {c.model for c in diff_locations(url, str(local)).changes
                                              if c.breaking}
        except GenRepoError:
            diff_breaking = None  # a side that cannot be read (the local one, for a name that is no version)
        try:
            publish(local, url, allow_breaking=state["allow_breaking"])
        except GenRepoError as error:
            event(f"{kind}: refused, {type(error).__name__} (exit {error.exit_code})")
            assert error.problems and all(p.file.startswith((url, str(local))) for p in error.problems), \
                [str(p) for p in error.problems]
            assert store.snapshot(prefix) == before
            problems = [str(p) for p in error.problems]
            no_version = kind == "renamed" and version_folder(name) is None
            if no_version:
                assert error.exit_code == 2
            if isinstance(error, ReleaseRefused):  # the gate refuses only what diff calls breaking, naming it
                assert not state["allow_breaking"] and diff_breaking, (diff_breaking, problems)
                assert {p.file.removeprefix(url).strip("/").split("/")[0] for p in error.problems
                        if p.message.startswith("breaking")} == diff_breaking, problems
                return "gate"
            # Any other refusal has a cause outside the gate: a folder that is no version, or an object the served
            # version holds that its lock does not list (a foreign name that is exactly a listed version).
            unlisted = any(version_folder(f) is not None and ("mlp", version_folder(f)) in listed
                           for f in state["foreign"])
            assert no_version or unlisted, (kind, name, state, problems)
            return "refused"
        event(f"{kind}: published")
        after = store.snapshot(prefix)
        assert kind != "renamed" or version_folder(name) is not None, f"{name!a} was published"
        if not state["allow_breaking"]:
            assert diff_breaking == set(), diff_breaking
        _check_published(after, store, prefix, local)
    for key, data in before.items():
        rel = key[len(store.key(prefix)) + 1:]
        if _foreign(rel, listed):
            assert after.get(key) == data, f"{rel!a} was removed or changed"
    return "published"
