"""``sftraffic up --cluster N [--voters M]`` (deploy/local/up.py): the brokers' command lines
name the first M as the metadata quorum's voters, every broker the same list; the others join
as observers. Nothing is started."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from deploy.local.up import cluster_parts, run
from framework.errors import StoreError


def voters_of(cmd: list[str]) -> str:
    return cmd[cmd.index("--voters") + 1]


@pytest.mark.parametrize(("size", "n_voters", "want"), [(3, None, 3), (5, None, 5), (5, 3, 3), (9, 5, 5)])
def test_the_first_m_brokers_vote_and_all_name_the_same_voters(
    tmp_path: Path, size: int, n_voters: int | None, want: int
) -> None:
    parts = cluster_parts(["sftraffic"], tmp_path, size, 9092, 0, {}, n_voters)
    assert len(parts) == size
    lists = {voters_of(p.cmd) for p in parts}
    assert len(lists) == 1
    (voters,) = lists
    assert [int(v.split("@")[0]) for v in voters.split(",")] == list(range(1, want + 1))
    assert voters.split(",")[0] == "1@127.0.0.1:19092"


@pytest.mark.parametrize(("size", "n_voters"), [(5, 4), (5, 1), (3, 5)])
def test_voters_must_be_an_odd_number_from_3_to_the_cluster_size(size: int, n_voters: int) -> None:
    with pytest.raises(StoreError, match="--voters"):
        run(argparse.Namespace(cluster=size, voters=n_voters))
