"""6.11b-1 allgather_matmul_two_way: all_gather(x) @ w を、右回りと左回りの 2 つのリングの ppermute で計算する。

チェックは隠しの軸の名前と形（1 デバイスの行 m、縮約の長さ K、1 デバイスの列）で、チェック自身の shard_map と jit で
学習者の関数を呼び、NumPy の x @ w と比べます。1 次元のメッシュの後、軸の大きさがデバイスの総数より小さい 2 次元の
メッシュでも比べます（デバイスの数を jax.device_count() で読む誤りは、そこでだけ値か形に出る）。
値が合わないときは、先に jaxpr の ppermute を見て、折り返しの組 (n − 1, 0)・(0, n − 1) がない組と、n − 1 回に
足りない回数を名指しします。構造は jaxpr の ppermute の組（右回り (j, j + 1) と左回り (j, j − 1) の両方、合わせて n − 1 回、片方は ⌊n/2⌋ 回）と、
コンパイルした HLO の集団通信（collective-permute が n − 1 個、all-gather なし）で確かめます。
2 デバイスでは右回りと左回りが同じ組、1 デバイスでは ppermute がないので、✅ の行でそう言います。
"""
from __future__ import annotations

import numpy as np

from ...checking import Fail, LearnerError, call, cannot_tell, exercise, f32, fmt, is_close, n_devices, walk
from ...hlo import collectives_in
from ..lesson_calls import lesson_calls
from .common import exercise_rng

AXIS = "cm_hidden"   # ノートブックにない軸の名前
ROWS = "cm_rows"     # 2 次元のメッシュのもう 1 本の軸
PERMUTE = {"ppermute", "ppermute_start"}
OTHERS = {"all_gather", "all_gather_invariant", "all_to_all", "psum", "psum_invariant", "psum_scatter",
          "reduce_scatter", "pmax", "pmin"}


def shapes(n: int) -> tuple[int, int, int]:
    """(1 デバイスの x の行 m, 縮約の長さ K, 1 デバイスの w の列): どれも n と違い、互いにも違う。"""
    free = [k for k in range(2, 12) if k != n]
    return free[1], free[3], free[0]


def expected(x, w, n: int, place=None):
    """出力 (n·m, n·列) の NumPy の値。place(d, c) はデバイス d がシャード c の積を書く行のシャード（誤りを名指しするため。
    None なら正しい位置 c）。place が None を返したシャードは書かない（行が 0 のまま）。"""
    m, cols = x.shape[0] // n, w.shape[1] // n
    out = np.zeros((n * m, n * cols))
    for d in range(n):
        wd = w[:, d * cols:(d + 1) * cols]
        for c in range(n):
            r = c if place is None else place(d, c)
            if r is not None:
                out[r * m:(r + 1) * m, d * cols:(d + 1) * cols] = x[c * m:(c + 1) * m] @ wd
    return out


def _run(fn, mesh, x, w):
    """mesh の上で学習者の関数を shard_map + jit で呼ぶ。(出力, jit した関数)。"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = mesh.shape[AXIS]
    m, cols = x.shape[0] // n, w.shape[1] // n

    def body(xs, ws):
        out = call(fn, xs, ws, AXIS)
        shape = tuple(out.shape) if hasattr(out, "shape") else None
        if shape is None:
            raise Fail(f"戻り値は形 {fmt((n * m, cols))} の配列のはずが、{type(out).__name__} でした。")
        if shape == (m, cols) and n > 1:
            raise Fail(f"出力の形が 1 デバイス分の行の {fmt(shape)} でした。all_gather(x) @ w と同じく、"
                       f"すべての行 {fmt((n * m, cols))} を返します。")
        if shape != (n * m, cols):
            raise Fail(f"1 デバイスの出力の形は {fmt((n * m, cols))}（n·m 行、w の列のシャード）のはずが {fmt(shape)} でした。")
        return jnp.asarray(out, jnp.float32)

    g = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(AXIS), P(None, AXIS)), out_specs=P(None, AXIS)))
    xs = jax.device_put(x, NamedSharding(mesh, P(AXIS)))
    ws = jax.device_put(w, NamedSharding(mesh, P(None, AXIS)))
    try:
        got = call(g, xs, ws)
    except LearnerError as exc:
        text = str(exc.exc)
        if "unbound axis name" in text:
            raise Fail("引数 axis_name 以外の軸の名前を使っています。lax.axis_index・lax.axis_size・lax.ppermute には"
                       " axis_name を渡します。") from None
        if "sources and destinations must be unique" in text:
            raise Fail("1 つの ppermute に右向きと左向きの組を入れたので、JAX がエラーを出しました。"
                       "向きごとに別の lax.ppermute で送ります。") from None
        if "static start/stop/step" in text:
            raise Fail("出力の行をトレーサの位置のスライスで書いたので、JAX がエラーを出しました。"
                       "lax.dynamic_update_slice_in_dim で書きます。") from None
        raise
    return np.asarray(got), g, (xs, ws)


LOOPS = {"while", "scan"}  # lax.fori_loop・lax.while_loop・lax.scan


def _loop_bodies(eqn):
    """ループの式の本体の jaxpr（scan の jaxpr、while の cond_jaxpr と body_jaxpr）。"""
    for key in ("jaxpr", "cond_jaxpr", "body_jaxpr"):
        body = eqn.params.get(key)
        if body is not None:
            yield getattr(body, "jaxpr", body)


def _structure(g, args, n: int):
    """jaxpr の ppermute の組の列、ほかの集団通信の名前の集合、ppermute を中に持つループがあるか。
    ループの中の ppermute は jaxpr に 1 度だけ現れるので、送る回数は数えられない。"""
    import jax

    try:
        eqns = list(walk(jax.make_jaxpr(g)(*args).jaxpr))
    except Exception as exc:  # 呼び出しは通ったので、ここで失敗することはまずない
        raise LearnerError(exc) from exc
    perms = [frozenset(tuple(p) for p in e.params["perm"]) for e in eqns if e.primitive.name in PERMUTE]
    looped = any(i.primitive.name in PERMUTE for e in eqns if e.primitive.name in LOOPS
                 for body in _loop_bodies(e) for i in walk(body))
    return perms, {e.primitive.name for e in eqns if e.primitive.name in OTHERS}, looped


def second_mesh(n: int):
    """(メッシュ, 軸 AXIS の大きさ): 軸 AXIS がデバイスの総数より小さい 2 次元のメッシュ。1 デバイスでは作れない。"""
    import jax

    if n == 1:
        return None, 0
    if n % 2 == 0:
        return jax.make_mesh((2, n // 2), (ROWS, AXIS)), n // 2
    return jax.make_mesh((1, n - 1), (ROWS, AXIS), devices=jax.devices()[: n - 1]), n - 1


@exercise("6.11b-1", "allgather_matmul_two_way")
def check_allgather_matmul_two_way(fn):
    import jax

    n = n_devices()
    rng = exercise_rng(1)
    m, k, cols = shapes(n)
    x = f32(rng.normal(size=(n * m, k)))
    w = f32(rng.normal(size=(k, n * cols)))
    with lesson_calls(fn, "ch6.overlap", "allgather_matmul", "_ring_gather") as called:
        got, g, args = _run(fn, jax.make_mesh((n,), (AXIS,)), x, w)
    if called:
        raise Fail(f"本編の overlap.{called[0]} を呼んでいます。右回りと左回りの lax.ppermute を、"
                   "この関数の中で自分で書いてください。")
    want = expected(x, w, n)
    right = frozenset((j, (j + 1) % n) for j in range(n))
    left = frozenset((j, (j - 1) % n) for j in range(n))
    if not is_close(got, want, rtol=1e-4, atol=1e-4):
        try:
            perms = _structure(g, args, n)[0]
        except LearnerError:
            perms = None
        if perms and n > 1 and any(p in (right - {(n - 1, 0)}, left - {(0, n - 1)}) for p in perms):
            raise Fail(f"ppermute の組に (n − 1, 0)（左回りは (0, n − 1)）がありません（n = {n}）。"
                       "送信先に現れないデバイスは 0 を受け取ります。組は (j, (j ± 1) % n) です。")
        named = [
            (lambda d, c: (2 * d - c) % n,
             "右回りと左回りの積を書く行が入れ替わっています。右回りのステップ s に届くのはデバイス (d − s) mod n のシャードです。"),
            (lambda d, c: None if c == d else c,
             "そのデバイスのシャードの積（ステップ 0 の x @ w）を書いていないので、その行が 0 です。"),
            (lambda d, c: None if c == (d + n // 2) % n and n % 2 == 0 and n > 1 else c,
             "ちょうど反対側のシャードの行が 0 です。n が偶数なら右回りで ⌊n/2⌋ 回送り、反対側のシャードも掛けます。"),
        ]
        for place, message in named:
            if is_close(got, expected(x, w, n, place), rtol=1e-4, atol=1e-4):
                raise Fail(message)
        if perms is not None and n > 1 and len(perms) < n - 1:
            raise Fail(f"ppermute が {len(perms)} 回で、合わせて n − 1 = {n - 1} 回のはずです。ステップ s は range(1, n // 2 + 1)"
                       " で 1 から ⌊n/2⌋ まで回し、左回りは s ≤ ⌊(n − 1)/2⌋ のときだけ送ります。")
        raise Fail(f"出力が all_gather(x) @ w と一致しません（デバイス {n} 個）。届いたシャード c の積を、行 c·m から書きます。")
    perms, others, looped = _structure(g, args, n)
    if looped and n > 1:
        raise Fail("ppermute を lax.fori_loop（または scan、while_loop）の中に書いています。ループの中の ppermute は "
                   "jaxpr に 1 回だけ現れ、送る回数と向きを確かめられません。ステップは Python の for で書いてください。")
    if others:
        used = "・".join(sorted(others))
        raise Fail(f"{used} を使っています。この問題では、シャードを lax.ppermute だけで右回りと左回りに送ります。")
    if n > 1:
        if not perms:
            raise Fail("ppermute がありません。シャードは lax.ppermute で隣のデバイスへ送ります。")
        for perm in perms:
            if perm not in (right, left):
                shown = ", ".join(f"({a}, {b})" for a, b in sorted(perm))
                raise Fail(f"ppermute の組 {shown} が、右隣 (j, (j + 1) % n) へも左隣 (j, (j − 1) % n) へも送る組ではありません。")
        n_right = sum(p == right for p in perms)
        n_left = len(perms) - n_right
        if n > 2 and (n_right == 0 or n_left == 0):
            raise Fail(f"ppermute が一方向だけ（{len(perms)} 回）です。右回りと左回りの両方に送ると、ステップが約半分になります。")
        if len(perms) == 2 * (n - 1) and n > 2:
            raise Fail(f"右回りにも左回りにも n − 1 回ずつ送っています（合わせて {len(perms)} 回）。"
                       "同じシャードが 2 度届くので、片方は ⌈(n − 1)/2⌉ 回、もう片方は ⌊(n − 1)/2⌋ 回にします。")
        if len(perms) == n and n % 2 == 0:
            raise Fail(f"ppermute が {n} 回で、ちょうど反対側のシャードを両方向から受け取っています。"
                       "右回りで n/2 回、左回りで n/2 − 1 回送れば足ります。")
        if len(perms) != n - 1 or sorted((n_right, n_left)) != sorted((n // 2, (n - 1) // 2)):
            raise Fail(f"ppermute が右回り {n_right} 回、左回り {n_left} 回でした。"
                       f"合わせて n − 1 = {n - 1} 回で、片方が {n // 2} 回、もう片方が {(n - 1) // 2} 回です。")
        found = collectives_in(g.lower(*args).compile().as_text())
        if found != {"collective-permute": n - 1}:
            raise Fail(f"コンパイルした HLO の集団通信が {found} でした。collective-permute が {n - 1} 個だけのはずです。")
    mesh2, n2 = second_mesh(n)
    if mesh2 is not None:
        x2 = f32(rng.normal(size=(n2 * m, k)))
        w2 = f32(rng.normal(size=(k, n2 * cols)))
        try:
            got2 = _run(fn, mesh2, x2, w2)[0]
        except (Fail, LearnerError):
            got2 = None
        if got2 is None or not is_close(got2, expected(x2, w2, n2), rtol=1e-4, atol=1e-4):
            raise Fail(f"1 次元のメッシュでは合い、軸 axis_name の大きさが {n2}（全デバイスは {n} 個）の 2 次元のメッシュで"
                       "合いません。軸の大きさは lax.axis_size(axis_name) で求めます。")
    note = ""
    if n == 1:
        note = cannot_tell("ppermute の向きと回数、軸の大きさの取り違え")
    elif n == 2:
        note = cannot_tell("ppermute の向き（右回りと左回りが同じ組）")
    if n == 1:
        return f"1 デバイスで x @ w と一致しました（ppermute はありません）。{note}"
    return (f"デバイス {n} 個で all_gather(x) @ w と一致し、ppermute は右回りと左回りに合わせて {n - 1} 回、"
            f"ステップは {n // 2 + 1} 回でした。{note}")
