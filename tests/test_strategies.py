"""ch6.strategies: 6.8a と 6.8b が見せる並列化の表の正本。"""
import pytest

from ch6 import glossary, show, strategies


def test_six_strategies_each_with_every_column():
    rows = strategies.rows()
    assert len(rows) == 6 and all(len(r) == len(strategies.HEADER) for r in rows)
    assert all(cell.strip() for r in rows for cell in r)
    assert len({s.name for s in strategies.STRATEGIES}) == 6


def test_fsdp_reuses_the_data_axis_and_says_so():
    owners = strategies.axis_owners()
    assert owners["data"] == ["データ並列", "FSDP（ZeRO-3）"]
    assert len(owners) == 5  # 6 つの並列化で軸は 5 本
    assert "データ並列と同じ軸" in strategies.rows(["axis"])[1][0]
    assert "data" in strategies.by_name("エキスパート並列").axis_note


def test_collectives_name_the_phase():
    for s in strategies.STRATEGIES:
        assert "順伝播" in s.collectives or "逆伝播" in s.collectives, s.name
    assert "all-reduce" in strategies.by_name("データ並列").collectives
    assert "ppermute" in strategies.by_name("パイプライン並列").collectives
    assert "リンクが遅い" in strategies.by_name("パイプライン並列").pays_off


def test_data_parallel_all_reduce_overlaps_in_buckets():
    """重なるのは、バケットごとの all-reduce と残りの逆伝播（6.11）。最後に 1 回の all-reduce は何とも重ならない。"""
    collectives = strategies.by_name("データ並列").collectives
    assert "バケット" in collectives and "残りの逆伝播" in collectives
    assert "1 ステップに 1 回" not in collectives


def test_expert_parallelism_pays_off_for_memory_not_for_moe():
    """割に合う場面は「エキスパートを分割する」理由（複製すると入らない、all-to-all が安い）。
    「パラメータを増やしても 1 トークンの計算量は変わらない」は MoE そのものの理由で、並列化の理由ではない。"""
    pays_off = strategies.by_name("エキスパート並列").pays_off
    assert "入らない" in pays_off and "all-to-all" in pays_off
    assert "計算量" not in pays_off


def test_columns_can_be_chosen_and_unknown_ones_are_refused():
    assert strategies.header(["name", "axis"]) == ["並列化", "メッシュの軸"]
    assert [r[0] for r in strategies.rows(["name"])] == [s.name for s in strategies.STRATEGIES]
    with pytest.raises(ValueError, match="表にない列"):
        strategies.rows(["colour"])
    with pytest.raises(KeyError):
        strategies.by_name("データ並行")
    assert strategies.by_name("FSDP").axis == "data"


def test_the_table_prints_and_uses_the_glossary_words():
    text = show.table(strategies.rows(), header=strategies.HEADER)
    assert text.count("\n") == 1 + 6
    hits = [around for r in glossary.rejected() for around in r.find(text)]
    assert hits == []
