"""The one run-folder mechanism: config check on resume, torn-line repair, atomic writes, sealed
binary caches, cache dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from scopeguard._paths import cache_dir
from scopeguard.data import atomic_open, atomic_write_sealed, atomic_write_text, unseal
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.runs import JsonlLog, RunFolder, repair_torn_tail


class Cfg(BaseModel):
    name: str
    k: int = 3
    limit: int | None = None
    tags: tuple[str, ...] = ()


class Row(BaseModel):
    id: str
    value: int


def test_resume_refuses_another_config_naming_each_field(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run", Cfg, free=("limit",))
    folder.open(Cfg(name="a", tags=("x",), limit=2))
    folder.open(Cfg(name="a", tags=("x",), limit=5))  # a free field may change
    assert folder.read_config().limit == 5
    with pytest.raises(ConfigurationError, match=r"name: 'a' -> 'b'; k: 3 -> 4"):
        folder.open(Cfg(name="b", k=4, tags=("x",)))
    assert folder.read_config() == Cfg(name="a", tags=("x",), limit=5)  # a refused run changes nothing


def test_a_configuration_an_earlier_version_saved_is_read_through_upgrade(tmp_path: Path) -> None:
    # a run saved before ``k`` existed behaved as k=1: resuming it under the default k=3 is a change
    (tmp_path / "run").mkdir()
    atomic_write_text(tmp_path / "run" / "config.json", '{"name": "a", "limit": null, "tags": []}')

    def upgrade(saved: dict[str, Any]) -> dict[str, Any]:
        if saved["name"] == "old":
            raise ConfigurationError("saved by a version this one cannot resume")
        return {"k": 1, **saved}

    with pytest.raises(ConfigurationError, match=r"k: 1 -> 3"):
        RunFolder(tmp_path / "run", Cfg, upgrade=upgrade).open(Cfg(name="a"))
    RunFolder(tmp_path / "run", Cfg, upgrade=upgrade).open(Cfg(name="a", k=1))  # as it ran: resumes
    assert RunFolder(tmp_path / "run", Cfg, upgrade=upgrade).read_config().k == 1
    # a field unknown to the saved run stays as before without an upgrade: not compared
    RunFolder(tmp_path / "other", Cfg).open(Cfg(name="a"))
    # one the upgrade refuses is refused naming the folder
    atomic_write_text(tmp_path / "run" / "config.json", '{"name": "old"}')
    with pytest.raises(ConfigurationError, match=r"run: saved by a version this one cannot resume"):
        RunFolder(tmp_path / "run", Cfg, upgrade=upgrade).open(Cfg(name="old"))


def test_merge_and_missing_config(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run", Cfg, free=("tags",))
    with pytest.raises(InputError, match="not a run folder"):
        folder.read_config()
    folder.open(Cfg(name="a", tags=("x",)))

    def merge(old: Cfg, new: Cfg) -> Cfg:
        return new.model_copy(update={"tags": old.tags + new.tags})

    merged = folder.open(Cfg(name="a", tags=("y",)), merge=merge)
    assert merged.tags == ("x", "y") and folder.read_config().tags == ("x", "y")


def test_torn_last_line_is_cut_and_records_survive(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    log = JsonlLog(path)
    for i in range(3):
        log.append(Row(id=f"r{i}", value=i))
    with path.open("a") as fh:
        fh.write('{"id": "r3", "val')  # killed mid-append
    reopened = JsonlLog(path)
    assert path.read_text().endswith("\n") and repair_torn_tail(path) == 0
    assert reopened.keys(lambda row: row["id"]) == {"r0", "r1", "r2"}
    reopened.append({"id": "r3", "value": 3})
    assert [r.value for r in reopened.records(Row)] == [0, 1, 2, 3]


def test_a_line_without_newline_at_all_is_cut_to_empty(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "r0"')
    assert repair_torn_tail(path) == len('{"id": "r0"') and path.read_bytes() == b""


def test_atomic_open_keeps_the_old_file_when_the_block_fails(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    atomic_write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half")
        raise RuntimeError("killed")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_sealed_file_reads_back_and_a_damaged_one_says_how(tmp_path: Path) -> None:
    path = tmp_path / "state.bin"
    payload = bytes(range(256)) * 40
    atomic_write_sealed(path, payload)
    assert unseal(path.read_bytes()) == payload
    _flip(path, len(path.read_bytes()) - 100)  # one bit of the payload
    with pytest.raises(ValueError, match="checksum does not match"):
        unseal(path.read_bytes())
    atomic_write_sealed(path, payload)
    path.write_bytes(path.read_bytes()[:-10])  # a cut copy
    with pytest.raises(ValueError, match="not 10240: cut short"):
        unseal(path.read_bytes())
    with pytest.raises(ValueError, match="cut short inside its seal"):
        unseal(path.read_bytes()[:12])
    # written before the seal: handed back whole, for its own format to check
    assert unseal(b"\x93NUMPY old file") == b"\x93NUMPY old file"


def test_cache_dir_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path))
    assert cache_dir("features") == tmp_path / "features"
    monkeypatch.delenv("SCOPEGUARD_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "scopeguard"
