"""6.3a-3: 正しい 3 つの spec を違う順番で返すと、分け方ではなく順番を言う（issue 22 の 4）。"""
from jax.sharding import PartitionSpec as P

from tests.checkhelp import expect


def test_x_and_w_swapped_names_the_order():
    expect("6.3a-3", lambda: (P("data", None), P(), P(None, "data")), "fail",
           "順番が違い", "x_spec を P()", "w_spec を P('data', None)", "(x_spec, w_spec, out_spec) の順")


def test_w_and_out_swapped_names_the_order():
    expect("6.3a-3", lambda: (P(), P(None, "data"), P("data", None)), "fail",
           "順番が違い", "out_spec を P(None, 'data')")


def test_a_wrong_split_still_names_the_split():
    # 並べ替えても条件を満たさない答えは、これまでどおり分け方を言う
    expect("6.3a-3", lambda: (P(), P("data", None), P("data", None)), "fail", "P(None, 'data') なので")


def test_the_right_order_passes():
    expect("6.3a-3", lambda: (P(), P("data", None), P(None, "data")), "pass")
