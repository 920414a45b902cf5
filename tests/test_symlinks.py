"""Symlinked files and folders at any depth of a repository (issue 37's class): one walk, one rule, every reader.

A red-team generator (hypothesis) takes the example repository built for the python target with warmup data (so it
has ``<model>/warmup/<version>/`` folders), and plants one symlink at a random depth and place: an existing file or
folder replaced by a link to a copy of it (outside the repository, or another entry inside it), or a new link (to a
folder or a file, inside, outside or nowhere) added in any folder. Every reader of a local repository must see it:
lint reports it at its path (rule ``symlink``), ``verify`` refuses it, ``publish`` refuses before anything is
uploaded (to the real S3 server on loopback), and ``diff``, ``report``, ``smoke`` and ``perf-config`` refuse to read
the repository at all (:func:`generator.confinement.refuse_symlinks`), none of them reading through it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.confinement import walk_tree
from generator.errors import GenRepoError
from generator.reports.html_page import build_report
from generator.repository.contract_sources import load_location
from generator.repository.publish import publish
from generator.repository.verify import verify_repository
from generator.serving.perf_models import models_from_repository
from generator.serving.smoke_results import SmokeOptions
from generator.serving.smoke_session import smoke_session
from tests.lint_cases import lint_repository
from tests.object_stores import ObjectStore

#: Link names a generator may add: plain, hidden, version-like, Triton's own folder names, non-ASCII.
LINK_NAMES = st.sampled_from(["extra", ".hidden", "2", "warmup", "gen_repo", "model.py", "x.onnx", "名前", "1"])
_PREFIXES = itertools.count()


def _entries(repo: Path) -> list[tuple[str, bool]]:
    """(relative path, is a folder) of everything inside the model folders, the model folders included (os.walk)."""
    out = []
    for parent, folders, files in os.walk(repo):
        base = Path(parent).relative_to(repo)
        out += [((base / name).as_posix(), True) for name in folders]
        out += [((base / name).as_posix(), False) for name in files if base != Path(".")]
    return sorted(out)


def _plant(repo: Path, outside: Path, data: st.DataObject) -> str:
    """Plant one symlink in ``repo`` as the generator draws it; return its path relative to ``repo``."""
    entries = _entries(repo)
    mode = data.draw(st.sampled_from(["replace", "add"]), label="mode")
    if mode == "replace":
        rel, is_folder = data.draw(st.sampled_from(entries), label="replaced")
        where = data.draw(st.sampled_from(["outside", "inside"]), label="target")
        path = repo / rel
        if where == "outside":  # the same bytes elsewhere: a link that reads identical is still refused
            target = outside / f"copy{len(list(outside.iterdir()))}"
            shutil.move(path, target)
        else:  # another entry of the repository, of the same kind (a folder for a folder, a file for a file)
            same = [e for e, f in entries if f == is_folder and e != rel and not e.startswith(rel + "/")
                    and not rel.startswith(e + "/")]
            if not same:
                return _plant(repo, outside, data)
            target = repo / data.draw(st.sampled_from(same), label="inside")
            shutil.rmtree(path) if is_folder else path.unlink()
        path.symlink_to(target, target_is_directory=is_folder)
        return rel
    folders = [e for e, f in entries if f]
    parent = data.draw(st.sampled_from(folders), label="parent")
    name = data.draw(LINK_NAMES, label="name")
    if (repo / parent / name).exists() or (repo / parent / name).is_symlink():
        return _plant(repo, outside, data)
    target = data.draw(st.sampled_from([outside, outside / "nowhere", Path("/etc/hostname"),
                                        repo / parent]), label="to")
    (repo / parent / name).symlink_to(target, target_is_directory=target.is_dir())
    return f"{parent}/{name}"


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_symlink_planted_anywhere_is_seen_by_every_reader(data: st.DataObject, warmup_example_repository: Path,
                                                             s3_server: ObjectStore, tmp_path_factory,  # type: ignore[no-untyped-def]
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    base = tmp_path_factory.mktemp("planted")
    repo, outside = base / "repo", base / "outside"
    shutil.copytree(warmup_example_repository, repo, symlinks=True)
    outside.mkdir()
    assert any(e.endswith("/warmup") for e, _ in _entries(repo))  # the class's first case is in reach
    rel = _plant(repo, outside, data)
    links = [r for r, st_ in walk_tree(repo) if stat.S_ISLNK(st_.st_mode)]
    assert links == [rel]

    lint_links = [f for f in lint_repository(repo) if f.rule == "symlink"]
    assert [(f.file, f.severity) for f in lint_links] == [(rel, "error")], [str(f) for f in lint_links]
    assert str(lint_links[0]).startswith(f"{rel}: error: ")

    refused = [p for p in verify_repository(repo) if Path(p.file) == repo / rel]
    assert refused and refused[0].message.startswith("refused: a symlink"), verify_repository(repo)

    prefix = f"symlinks{next(_PREFIXES)}"
    with pytest.raises(GenRepoError) as publish_error:
        publish(repo, s3_server.url(prefix))
    assert any(Path(p.file) == repo / rel for p in publish_error.value.problems)
    assert s3_server.fs().find(s3_server.key(prefix)) == []  # nothing uploaded

    readers = {
        "diff": lambda: load_location(str(repo)),
        "smoke": lambda: smoke_session(str(repo), url="127.0.0.1:1", protocol="grpc", models=(),
                                       options=SmokeOptions()),
        "perf-config": lambda: models_from_repository(repo),
        "report": lambda: build_report(str(repo)),
    }
    for name, read in readers.items():
        with pytest.raises(GenRepoError) as error:
            read()
        assert [p.file for p in error.value.problems] == [str(repo / rel)], name
        assert error.value.problems[0].message.startswith("refused: a symlink"), name
