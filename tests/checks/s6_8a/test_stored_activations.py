"""6.8a-2 peak_activations: 正しい数え方は通り、自然な誤りはそれぞれの言葉で落ちる。"""
import numpy as np

from ch6 import Status
from ch6.checks.s6_8a.common import peak_stored
from ch6.checks.s6_8a.stored_activations import before_first_backward, max_before_increment
from tests.checkhelp import boom, expect, not_done

# 正しい数え方（peak_stored）と名前を言う誤り（max_before_increment、before_first_backward）はチェックのものを使い、写さない
# （最初の B までの F の数は、GPipe・1F1B では最大と同じ）


def with_numpy(schedule):
    kind = np.array([[{"F": 1, "B": -1}.get(e[:1], 0) for e in row] for row in schedule])
    return np.cumsum(kind, axis=1).max(axis=1)  # F のティックで最大になるので、B の位置は関係しない


def with_sets(schedule):
    out = []
    for row in schedule:
        live, best = set(), 0
        for e in row:
            if e[:1] == "F":
                live.add(int(e[1:]))
                best = max(best, len(live))
            elif e[:1] == "B":
                live.discard(int(e[1:]))
        out.append(best)
    return tuple(out)


def counts_forwards(schedule):
    return [sum(e.startswith("F") for e in row) for row in schedule]


def global_max(schedule):
    p = peak_stored(schedule)
    return [max(p)] * len(p)


def scalar(schedule):
    return max(peak_stored(schedule))


def final_count(schedule):
    return [sum(e.startswith("F") for e in row) - sum(e.startswith("B") for e in row) for row in schedule]


def busy_cells(schedule):
    return [sum(bool(e) for e in row) for row in schedule]


def one_less(schedule):
    return [p - 1 for p in peak_stored(schedule)]


def one_digit(schedule):  # 番号を 1 文字だけ読む（"F10" を 1 と読む）: 集合で数えると落ちる
    out = []
    for row in schedule:
        live, best = set(), 0
        for e in row:
            if e[:1] == "F":
                live.add(e[1])
                best = max(best, len(live))
            elif e[:1] == "B":
                live.discard(e[1])
        out.append(best)
    return out


def test_reference_numpy_and_sets_pass():
    expect("6.8a-2", peak_stored, Status.PASS, "1F1B")
    expect("6.8a-2", with_numpy, Status.PASS)
    expect("6.8a-2", with_sets, Status.PASS)


def test_counting_forwards_only_is_named():
    expect("6.8a-2", counts_forwards, Status.FAIL, "ステージ 0 の最大が", "順伝播の数", "1 減らします")


def test_global_max_and_scalar_are_named():
    expect("6.8a-2", global_max, Status.FAIL, "全ステージで同じ最大値")
    expect("6.8a-2", scalar, Status.FAIL, "整数 1 つ", "ステージごと")


def test_final_count_busy_cells_and_one_less_are_named():
    expect("6.8a-2", final_count, Status.FAIL, "表の最後に持っている数")
    expect("6.8a-2", busy_cells, Status.FAIL, "空きでないマス")
    expect("6.8a-2", one_less, Status.FAIL, "1 少ない", "1 増やした後")


def test_hidden_tables_are_not_all_built_like_the_lesson():
    from ch6.checks.s6_8a.common import gpipe_order, one_f_one_b_order, simulate
    lesson_like = [simulate(gpipe_order(4, 11)), simulate(one_f_one_b_order(4, 11))]
    assert all(before_first_backward(t) == peak_stored(t) for t in lesson_like)  # この近道は本編の表では正しい


def test_counting_only_up_to_the_first_backward_is_named():
    expect("6.8a-2", before_first_backward, Status.FAIL, "最初の B まで", "その後")


def test_misreading_two_digit_numbers_is_named_not_as_one_less():
    msg = expect("6.8a-2", one_digit, Status.FAIL, "になるはずが", "1 文字", "F10")
    assert "1 少な" not in msg


def lesson_rule(schedule):  # 本編の 1F1B の式 S − s をそのまま返す
    return [len(schedule) - s for s in range(len(schedule))]


def first_char(schedule):  # e[0] で種類を読む: 空きのマス "" で IndexError
    out = []
    for row in schedule:
        live = best = 0
        for e in row:
            live += {"F": 1, "B": -1}[e[0]] if e[0] in "FB" else 0
            best = max(best, live)
        out.append(best)
    return out


def test_the_lessons_1f1b_rule_is_named():
    expect("6.8a-2", lesson_rule, Status.FAIL, "GPipe の表", "S − s", "1F1B とは限らない")


def test_index_error_on_an_idle_cell_is_explained():
    msg = expect("6.8a-2", first_char, Status.FAIL, "空文字", "startswith")
    assert "IndexError" not in msg and "string index" not in msg


def test_wrong_length_and_types():
    expect("6.8a-2", lambda s: peak_stored(s)[:-1], Status.FAIL, "長さ")
    expect("6.8a-2", lambda s: [[p] for p in peak_stored(s)], Status.FAIL, "形")
    expect("6.8a-2", lambda s: [p + 0.5 for p in peak_stored(s)], Status.FAIL, "整数")
    # editor2_b: 配列でない値に「形 ()」を言わず、型の名前と「でした」の間に空白
    msg = expect("6.8a-2", lambda s: None, Status.FAIL, "NoneType でした")
    assert "形 ()" not in msg, msg


def test_not_done_and_learner_error():
    expect("6.8a-2", not_done, Status.NOT_DONE)
    expect("6.8a-2", boom, Status.ERROR, "ZeroDivisionError")


def _steps(schedule):
    return np.array([[1 if e.startswith("F") else -1 if e.startswith("B") else 0 for e in row] for row in schedule])


def test_fresh_slips_from_the_statement():
    # 表を 1 本につないで cumsum する: 行が 0 で終わる表では正しく、順伝播だけの表で前の行の残りを持ち越す
    def flattened(schedule):
        s = _steps(schedule)
        return [int(v) for v in np.cumsum(s.reshape(-1)).reshape(s.shape).max(axis=1)]
    expect("6.8a-2", flattened, Status.FAIL, "順伝播だけの順番", "行をつないで", "0 から数え直します")

    # 軸を取り違えた cumsum（列の向き）
    def along_columns(schedule):
        return [int(v) for v in np.cumsum(_steps(schedule), axis=0).max(axis=1)]
    expect("6.8a-2", along_columns, Status.FAIL, "列（ティック）の向き")

    # B で減らしてから最大をとり、F はその後で増やす（F のティックの後の数を最大に入れない）
    expect("6.8a-2", max_before_increment, Status.FAIL, "F で 1 増やす前に最大")
