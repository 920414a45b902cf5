"""Arrays read within bounds (generator/contracts/array_files.py): headers checked before allocation; bombs refused.

The bombs are real files: a 300-byte ``.npz`` whose header declares a (2^31, 16) float32 array (128 GiB), and a
1 MB deflate stream that inflates to 1 GiB (built block by block: a full-flush deflate block of 16 MiB of zeros is
self-contained, so 64 copies of it are a valid stream, made in milliseconds instead of compressing 1 GiB).
``check-request`` runs in a real process and its peak memory is measured (tests/process_helpers.py).
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from generator.building.samples import read_samples
from generator.contracts.array_files import open_array_file, read_arrays
from generator.errors import GenRepoError
from tests.manifest_helpers import batch_graph, one_model
from tests.process_helpers import run_cli

GOOD = Path(__file__).parents[1] / "lint_corpus" / "good"
CHECK = ["check-request", "--repo", str(GOOD), "mlp_python"]  # input_x: float32 [1..32, 16]
#: Peak memory a check-request of a small file stays under (Python, numpy and tritonclient take about 120 MiB).
SMALL_PEAK_MIB = 400


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def write_zip(path: Path, name: str, stored: bytes, method: int, crc: int, size: int) -> Path:
    """One-member zip written field by field (``stored``: the member's bytes as stored, ``size``: inflated)."""
    raw_name = name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(stored), size, len(raw_name), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(stored), size,
                          len(raw_name), 0, 0, 0, 0, 0o644 << 16, 0)
    offset = len(local) + len(raw_name) + len(stored)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(raw_name), offset, 0)
    path.write_bytes(local + raw_name + stored + central + raw_name + end)
    return path


def header_bomb(path: Path, name: str = "input_x") -> Path:
    """An .npz of about 300 bytes whose member declares shape (2^31, 16) float32 and holds 16 bytes."""
    stored = npy_header((2**31, 16)) + bytes(16)
    return write_zip(path, f"{name}.npy", stored, 0, zlib.crc32(stored), len(stored))


@pytest.fixture(scope="module")
def deflate_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1 MB of deflate that inflates to 1 GiB: an .npy of shape (2^28,) float32 zeros named input_x."""
    header = npy_header((2**28,))
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    chunk = bytes(16 << 20)
    block_compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = block_compressor.compress(chunk) + block_compressor.flush(zlib.Z_FULL_FLUSH)
    stream = head + block * 64 + b"\x03\x00"  # an empty final block ends the stream
    crc = zlib.crc32(header)
    for _ in range(64):
        crc = zlib.crc32(chunk, crc)
    path = write_zip(tmp_path_factory.mktemp("bomb") / "bomb.npz", "input_x.npy", stream, 8, crc,
                     len(header) + (1 << 30))
    assert path.stat().st_size < 1_100_000
    return path


# ------------------------------------------------------------------------------------------------ check-request
def test_check_request_refuses_a_header_bomb_unread(tmp_path: Path) -> None:
    """Used to be ``Unable to allocate 128. GiB`` (a traceback, exit 1); now refused from the header, exit 2."""
    bomb = header_bomb(tmp_path / "bomb.npz")
    assert bomb.stat().st_size < 400
    code, output, peak = run_cli([*CHECK, str(bomb)])
    assert code == 2, output
    assert "Traceback" not in output
    assert (f"{bomb}: /input_x: array 'input_x' declares shape [2147483648, 16] float32: 34359738368 elements "
            "(137438953472 bytes); at most 1073741824 elements are accepted") in output
    assert peak < SMALL_PEAK_MIB, f"{peak} MiB"


def test_check_request_refuses_a_deflate_bomb_uninflated(deflate_bomb: Path) -> None:
    """Used to inflate it whole (1.1 GB, seconds); now refused from the zip directory: exit 2, located."""
    code, output, peak = run_cli([*CHECK, str(deflate_bomb)])
    assert code == 2, output
    assert "Traceback" not in output
    assert f"{deflate_bomb}: /input_x: member 'input_x.npy' inflates from" in output
    assert "more than 100 times (a deflate bomb?)" in output
    assert peak < SMALL_PEAK_MIB, f"{peak} MiB"


def test_check_request_reads_only_arrays_that_fit_the_contract(deflate_bomb: Path) -> None:
    """With the inflate limit lifted, the 1 GiB array is still never read: its header is outside the contract."""
    code, output, peak = run_cli([*CHECK, str(deflate_bomb), "--json"],
                                 env={"GEN_REPO_MAX_ARRAY_INFLATE_RATIO": "100000"})
    assert code == 1, output
    problems = json.loads(output)["cases"][0]["problems"]
    assert [p["kind"] for p in problems] == ["rank"]
    assert "input 'input_x' has 1 axes (shape [268435456]), expected 2" in problems[0]["message"]
    assert peak < SMALL_PEAK_MIB, f"{peak} MiB"


def test_check_request_still_reads_and_judges_what_fits(tmp_path: Path) -> None:
    np.savez(tmp_path / "ok.npz", input_x=np.zeros((4, 16), np.float32))
    code, output, _ = run_cli([*CHECK, str(tmp_path / "ok.npz")])
    assert (code, output.strip().splitlines()) == (
        0, ["model mlp_python: version 1 (highest version folder)", "valid: mlp_python [request]"])


# ------------------------------------------------------------------------------------------------ npz headers
def test_a_member_whose_size_disagrees_with_its_header_is_refused(tmp_path: Path) -> None:
    stored = npy_header((1 << 20, 16)) + bytes(64)
    liar = write_zip(tmp_path / "liar.npz", "x.npy", stored, 0, zlib.crc32(stored), len(stored))
    with pytest.raises(GenRepoError) as caught:
        read_arrays(liar)
    (problem,) = caught.value.problems
    assert (problem.file, problem.pointer) == (str(liar), "/x")
    assert problem.message == ("member 'x.npy' holds 192 bytes but its header declares shape [1048576, 16] float32 "
                               "(67108992 bytes with the header)")


def test_object_arrays_are_refused_from_their_header(tmp_path: Path) -> None:
    np.savez(tmp_path / "o.npz", ok=np.zeros(2), bad=np.array([{"a": 1}], dtype=object))
    with pytest.raises(GenRepoError) as caught:
        read_arrays(tmp_path / "o.npz")
    assert [(p.pointer, "need pickles" in p.message) for p in caught.value.problems] == [("/bad", True)]


def test_members_and_total_bytes_are_limited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    np.savez_compressed(tmp_path / "three.npz", a=np.zeros(100), b=np.zeros(100), c=np.zeros(100))  # 3 x 928 B
    assert sorted(read_arrays(tmp_path / "three.npz")) == ["a", "b", "c"]
    monkeypatch.setenv("GEN_REPO_MAX_ARRAY_MEMBERS", "2")
    with pytest.raises(GenRepoError, match="holds 3 arrays; at most 2 are accepted"):
        read_arrays(tmp_path / "three.npz")
    monkeypatch.delenv("GEN_REPO_MAX_ARRAY_MEMBERS")
    monkeypatch.setenv("GEN_REPO_MAX_ARRAY_FILE_BYTES", "2k")
    with pytest.raises(GenRepoError, match="its arrays declare 2784 bytes together; at most 2048 are accepted"):
        read_arrays(tmp_path / "three.npz")


def test_a_deflate_bomb_is_refused_by_the_library_too(deflate_bomb: Path) -> None:
    with pytest.raises(GenRepoError) as caught:
        open_array_file(deflate_bomb)
    assert [p.pointer for p in caught.value.problems] == ["/input_x"]


def test_not_a_zip_is_a_located_problem(tmp_path: Path) -> None:
    (tmp_path / "x.npz").write_bytes(b"not a zip at all")
    with pytest.raises(GenRepoError, match=r"cannot read as \.npz: BadZipFile"):
        read_arrays(tmp_path / "x.npz")


# ------------------------------------------------------------------------------------------------ safetensors
def safetensors_file(path: Path, header: dict[str, Any], data: bytes) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def test_safetensors_are_read_as_the_library_reads_them(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b/c": np.array([True, False]),
              "d": np.arange(4, dtype=np.int64)}
    save_file(arrays, str(tmp_path / "s.safetensors"))
    ours, theirs = read_arrays(tmp_path / "s.safetensors"), load_file(str(tmp_path / "s.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name])
        assert ours[name].dtype == theirs[name].dtype


def test_safetensors_headers_are_checked_against_the_file(tmp_path: Path) -> None:
    huge = safetensors_file(tmp_path / "huge.safetensors",
                            {"x": {"dtype": "F32", "shape": [1 << 20, 16], "data_offsets": [0, 64 << 20]}}, bytes(16))
    with pytest.raises(GenRepoError) as caught:
        read_arrays(huge)
    assert [(p.pointer, p.message) for p in caught.value.problems] == [
        ("/x", "array 'x' declares shape [1048576, 16] float32 (67108864 bytes) at bytes 0..67108864 of the 16 bytes "
               "of data the file holds")]
    bomb = safetensors_file(tmp_path / "bomb.safetensors",
                            {"x": {"dtype": "F32", "shape": [2**31, 16], "data_offsets": [0, 2**37]}}, b"")
    with pytest.raises(GenRepoError, match="at most 1073741824 elements are accepted"):
        read_arrays(bomb)
    (tmp_path / "long.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(GenRepoError, match="its header claims 1099511627776 bytes"):
        read_arrays(tmp_path / "long.safetensors")
    bf16 = safetensors_file(tmp_path / "bf16.safetensors",
                            {"x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}, bytes(4))
    with pytest.raises(GenRepoError, match="has dtype 'BF16'"):
        read_arrays(bf16)


# ------------------------------------------------------------------------------------------------ samples
def test_sample_calls_larger_than_the_plan_are_skipped_unread(tmp_path: Path) -> None:
    plan = one_model(tmp_path, batch_graph(1, 8))  # input_x [1..8, 16]
    np.savez(tmp_path / "s.npz", **{"fits/input_x": np.zeros((2, 16), np.float32)})
    stored = npy_header((2**14, 16)) + bytes(1 << 20)  # within every limit, far beyond the plan
    write_zip(tmp_path / "big.npz", "big/input_x.npy", stored, 0, zlib.crc32(stored), len(stored))
    calls, notes = read_samples(tmp_path / "s.npz", "npz", plan.inputs)
    assert list(calls) == ["fits"] and notes == []
    calls, notes = read_samples(tmp_path / "big.npz", "npz", plan.inputs)
    assert calls == {}
    assert notes == ["sample 'big' skipped unread: 'input_x' declares shape [16384, 16] float32, more than the 128 "
                     "elements its input takes at most"]
