"""The workspace's real path, asked of the kernel: the same answer as Python's walk, symlinks and all."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.protocol.validate import real_path


def test_real_path_names_what_python_s_walk_names(tmp_path: Path):
    (tmp_path / "root" / "project" / "deep").mkdir(parents=True)
    (tmp_path / "root" / "file.txt").write_text("x")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "root" / "escape")  # absolute target
    os.symlink("project", tmp_path / "root" / "relative")  # relative target
    os.symlink(tmp_path / "root" / "relative", tmp_path / "root" / "chain")  # a link to a link
    os.symlink(tmp_path / "root" / "loop-b", tmp_path / "root" / "loop-a")
    os.symlink(tmp_path / "root" / "loop-a", tmp_path / "root" / "loop-b")
    os.symlink(tmp_path / "nowhere", tmp_path / "root" / "dangling")
    (tmp_path / "root" / "named (deleted)").mkdir()
    locked = tmp_path / "root" / "locked"
    (locked / "inner").mkdir(parents=True)
    cases = [
        "root",
        "root/project/deep",
        "root/file.txt",
        "root/escape",
        "root/relative/deep",
        "root/chain",
        "root/chain/deep/missing/more",
        "root/missing",
        "root/escape/missing",
        "root/loop-a",
        "root/dangling",
        "root/named (deleted)",  # what the kernel names a directory removed meanwhile: Python's walk answers
        "root/locked/inner",
    ]
    locked.chmod(0o000)  # not searchable: the kernel refuses where Python's walk may still answer (as root it does not)
    try:
        for case in cases:
            path = str(tmp_path / case)
            assert real_path(path) == os.path.realpath(path), case
    finally:
        locked.chmod(0o700)
