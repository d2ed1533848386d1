"""6.9b-1 process_rows: 参照と別の正解（グローバルバッチ全体を作ってから切る）は通り、本編の乱数の窓、
プロセスごとの種、飛び飛びの行、エポックの境目で残りを捨てる、バッチ全体に 1 つのエポックの順序を使う、どのエポックも
同じ順序、形・型（uint8・int64 も）・順序の誤りは
それぞれの言葉で落ちる。"""
import numpy as np

from ch6 import Status
from ch6.checks.s6_9b.epoch_rows import reference, wrong_answer
from tests.checkhelp import boom, expect, not_done

EX = "6.9b-1"


def test_reference_passes():
    expect(EX, reference, Status.PASS, "エポックの境目")


def test_whole_batch_then_slice_passes():
    def by_stream(data, step, p, count, batch, seq, seed):
        data = np.asarray(data)
        w = len(data) // (seq + 1)
        win = data[: w * (seq + 1)].reshape(w, seq + 1)
        epochs = range(step * batch // w, (step + 1) * batch // w + 1)
        order = np.concatenate([np.random.default_rng((seed, e)).permutation(w) for e in epochs])
        offset = step * batch - epochs[0] * w
        rows = win[order[offset:offset + batch]]
        per = batch // count
        return rows[p * per:(p + 1) * per].astype(np.int32)
    expect(EX, by_stream, Status.PASS)


def _slip(kind):
    return lambda d, s, p, c, b, q, seed: wrong_answer(kind, np.asarray(d), s, p, c, b, q, seed).astype(np.int32)


def test_named_mistakes():
    expect(EX, _slip("lesson"), Status.FAIL, "乱数で位置を選んで")
    expect(EX, _slip("process_seed"), Status.FAIL, "プロセスごとに乱数の種")
    expect(EX, _slip("strided"), Status.FAIL, "飛び飛び")
    expect(EX, _slip("one_epoch"), Status.FAIL, "残りの窓を捨てて")
    expect(EX, _slip("same_order"), Status.FAIL, "同じ順序")
    expect(EX, _slip("batch_epoch"), Status.FAIL, "次のエポックに入った窓にも前のエポックの順序")


def test_fresh_mistakes_from_the_statement():
    expect(EX, _slip("seed_sum"), Status.FAIL, "seed + e", "default_rng((seed, e))")
    expect(EX, _slip("per_process_stride"), Status.FAIL, "t·(B/P)", "t·B 番目")


def test_shape_dtype_and_order():
    expect(EX, lambda *a: reference(*a)[:, :-1], Status.FAIL, "形")
    expect(EX, lambda *a: reference(*a).astype(np.float32), Status.FAIL, "整数")
    expect(EX, lambda *a: reference(*a).astype(np.uint8), Status.FAIL, "int32 で返す決まり", "uint8", ".astype(np.int32)")
    expect(EX, lambda *a: reference(*a).astype(np.int64), Status.FAIL, "int32 で返す決まり", "int64")
    expect(EX, lambda *a: reference(*a)[::-1], Status.FAIL, "行の順序")
    expect(EX, lambda *a: reference(*a) + 1, Status.FAIL, "一致しません")
    expect(EX, lambda *a: "rows", Status.FAIL, "形")


def test_not_done_and_error():
    expect(EX, not_done, Status.NOT_DONE)
    expect(EX, boom, Status.ERROR)


def test_learner_slips_are_named():
    """学習者の役で書いた答え（/tmp の下書きから）: どれも何を返したかと、実際の誤りの言葉で落ちる。"""
    def rows_as_list(*a):                                  # 行のリスト（np.stack を忘れる）
        return list(reference(*a))
    expect(EX, rows_as_list, Status.FAIL, "list が返りました", "np.stack")
    expect(EX, _slip("inverse"), Status.FAIL, "np.argsort(perm)")
    expect(EX, _slip("one_generator"), Status.FAIL, "1 つの default_rng(seed)")
    expect(EX, _slip("padded"), Status.FAIL, "最後の半端な窓", "len(data) // (seq + 1)")
    expect(EX, _slip("own_seed"), Status.FAIL, "seed + p")

    def next_step(data, step, *rest):                      # ステップを 1 から数える
        return reference(data, step + 1, *rest)
    expect(EX, next_step, Status.FAIL, "ステップ 1 の行が返りました", "0 から数えます")

    def stride_seq(data, step, p, count, batch, seq, seed):  # 窓を seq バイトずつずらして切る（重なる）
        data = np.asarray(data)
        w = (len(data) - 1) // seq
        win = np.stack([data[j * seq:j * seq + seq + 1] for j in range(w)])
        per = batch // count
        ids = []
        for k in range(step * batch + p * per, step * batch + (p + 1) * per):
            ids.append(np.random.default_rng((seed, k // w)).permutation(w)[k % w])
        return win[ids].astype(np.int32)
    expect(EX, stride_seq, Status.FAIL, "どれとも一致しません", "窓の番号")

    def epoch_from_step(data, step, p, count, batch, seq, seed):  # エポックをステップから数える
        data = np.asarray(data)
        w = len(data) // (seq + 1)
        win = data[: w * (seq + 1)].reshape(w, seq + 1)
        order = np.random.default_rng((seed, step // max(1, w // batch))).permutation(w)
        per = batch // count
        start = step * batch + p * per
        return win[order[[(start + j) % w for j in range(per)]]].astype(np.int32)
    expect(EX, epoch_from_step, Status.FAIL, "のはずが、窓", "が返りました")

    def whole_batch(data, step, p, count, batch, seq, seed):  # process_index を使わず全体を返す
        return reference(data, step, 0, 1, batch, seq, seed)
    expect(EX, whole_batch, Status.FAIL, "形", "グローバルバッチ全体")
