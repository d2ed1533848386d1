"""6.9a-1 make_rules: 隠しのモデルの設定とメッシュの形に合う、FSDP × テンソル並列の論理軸の規則。

メッシュは ``jax.sharding.AbstractMesh``（形と軸の名前だけ）なので、デバイスの数によらず、割り切れない場面を作れます。
確かめること（問題文の約束）:

- 規則で各パラメータを配置できる（同じメッシュ軸を 1 つの配列の 2 つの次元に使わない、どの次元も割り切れる）
- バッチは data と fsdp に分割し、tensor には分割しない
- パラメータの 1 デバイスあたりの要素数の合計が、約束の規則（割り切れる論理軸はすべて分割）と同じ
- 論理軸ごとの分割が問題文と同じ（要素数が同じでも、heads の代わりの head_dim、約束より多くの軸、約束にない論理軸の
  分割は、通信の形が変わるので不正解にする）
"""
from __future__ import annotations

import math

from ...checking import Fail, call, exercise
from ...lm import Config, logical_axes, to_mesh_spec
from ...recorded import recorded
from .common import exercise_rng

AXES = ("data", "fsdp", "tensor")


@recorded
def reference(config: Config, mesh) -> dict:
    t, f = mesh.shape["tensor"], mesh.shape["fsdp"]
    rules = {"batch": ("data", "fsdp")}
    if config.d_model % f == 0:
        rules["embed"] = "fsdp"
    for name, size in (("heads", config.n_heads), ("mlp", config.d_ff), ("vocab", config.vocab)):
        if size % t == 0:
            rules[name] = "tensor"
    if config.n_heads % t and config.d_head % t == 0:
        rules["head_dim"] = "tensor"
    return rules


def _leaves(tree, prefix=""):
    """(名前, 論理軸の P) の列（logical_axes の辞書を平らにする）。"""
    out = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _shapes(config: Config) -> dict[str, tuple[int, ...]]:
    import jax

    from ...lm import init_params

    shapes = jax.eval_shape(lambda: init_params(config, jax.random.key(0))[0])
    flat = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
        name = ".".join(str(getattr(p, "key", p)) for p in path)
        flat[name] = tuple(leaf.shape)
    return flat


def _axes(entry) -> str:
    """規則の 1 つの値（軸の名前か、そのタプル）を「tensor 軸」「data 軸と fsdp 軸」に。"""
    names = entry if isinstance(entry, tuple) else (entry,)
    return "と".join(f"{a} 軸" for a in names)


def _ways(entry, mesh) -> int:
    if entry is None:
        return 1
    names = (entry,) if isinstance(entry, str) else tuple(entry)
    return math.prod(mesh.shape[n] for n in names)


def per_device_elements(rules: dict, config: Config, mesh, what: str) -> dict[str, int]:
    """規則で配置したときの、パラメータごとの 1 デバイスあたりの要素数（配置できなければ Fail）。"""
    shapes = _shapes(config)
    out = {}
    for name, spec in _leaves(logical_axes(config)):
        try:
            mesh_spec = to_mesh_spec(spec, rules, mesh)
        except ValueError:
            raise Fail(f"{what}: 規則が {name}（論理軸 {tuple(spec)}）の 2 つの次元に同じメッシュの軸を使っています。"
                       "1 つのメッシュの軸は 1 つの配列の 1 つの次元にしか使えません。") from None
        except KeyError as err:
            raise Fail(f"{what}: 規則にメッシュにない軸 {err} があります。メッシュの軸は data・fsdp・tensor です。") from None
        shape = shapes[name]
        count = 1
        for dim, (size, entry) in enumerate(zip(shape, tuple(mesh_spec) + (None,) * len(shape))):
            ways = _ways(entry, mesh)
            if size % ways:
                logical = spec[dim]
                raise Fail(f"{what}: 規則が {logical} を {_axes(entry)}で {ways} 個に分割しています。パラメータ {name} のその軸の"
                           f"長さ {size} は {ways} で割り切れないので、配置できません。割り切れない論理軸は分割しない決まりです。")
            count *= size // ways
        out[name] = count
    return out


def _rules_dict(out, what: str) -> dict:
    if not isinstance(out, dict):
        raise Fail(f"{what}: 規則は辞書（論理軸の名前 → メッシュの軸）のはずが、{type(out).__name__} が返りました。")
    for k, v in out.items():
        names = (v,) if isinstance(v, str) else tuple(v) if isinstance(v, (tuple, list)) else None
        if not isinstance(k, str) or (v is not None and (names is None or not all(isinstance(n, str) for n in names))):
            raise Fail(f"{what}: 規則の項目 {k!r}: {v!r} が読めません。値はメッシュの軸の名前か、そのタプルか None です。")
        if names and any(n not in AXES for n in names):
            raise Fail(f"{what}: 規則にメッシュにない軸 {v!r} があります。メッシュの軸は data・fsdp・tensor です。")
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in out.items()}


def cases(r):
    """(説明, config, mesh の形): 割り切れる・heads だけ割り切れない・embed が割り切れない・大きさ 1 の軸・
    tensor だけで割り切れる・heads も head_dim も mlp も割り切れない・heads × head_dim だけが割り切れる。"""
    from jax.sharding import AbstractMesh

    def mesh(shape):
        return AbstractMesh(tuple(shape), AXES)

    d_head = int(r.choice([6, 12]))
    return [
        ("ヘッドの数が tensor 軸の大きさで割り切れない設定", Config(d_model=48, n_heads=5, d_head=d_head, d_ff=96, n_layers=1),
         mesh((1, 4, 3))),
        ("すべて割り切れる設定", Config(d_model=40, n_heads=4, d_head=8, d_ff=80, n_layers=2), mesh((2, 2, 2))),
        ("d_model が fsdp 軸の大きさで割り切れない設定", Config(d_model=50, n_heads=6, d_head=4, d_ff=72, n_layers=1),
         mesh((1, 3, 2))),
        ("tensor 軸の大きさが 1 のメッシュ", Config(d_model=36, n_heads=3, d_head=4, d_ff=36, n_layers=1), mesh((2, 3, 1))),
        ("語彙が tensor 軸の大きさで割り切れない設定", Config(vocab=250, d_model=24, n_heads=4, d_head=6, d_ff=48, n_layers=1),
         mesh((1, 2, 4))),
        # heads と d_ff は tensor（2）で割り切れ、data・fsdp（3）では割り切れない: 違う軸で試す答えは複製が増える
        ("ヘッドの数と d_ff を割り切るのが tensor 軸の大きさだけの設定", Config(d_model=60, n_heads=4, d_head=5, d_ff=100, n_layers=1),
         mesh((3, 3, 2))),
        # heads も d_head も d_ff も tensor（4）で割り切れない: 割り切れるかを試さずに分割する答えは配置できない
        ("ヘッドの数も head_dim も d_ff も tensor 軸の大きさで割り切れない設定",
         Config(d_model=48, n_heads=5, d_head=7, d_ff=90, n_layers=1), mesh((1, 2, 4))),
        # heads（6）も d_head（6）も tensor（4）で割り切れず、積 36 だけが割り切れる: head_dim に回すかを
        # heads × d_head で試す答えは、head_dim を分割して配置できない
        ("ヘッドの数と head_dim は割り切れず、その積だけが tensor 軸の大きさで割り切れる設定",
         Config(d_model=40, n_heads=6, d_head=6, d_ff=80, n_layers=1), mesh((1, 2, 4))),
    ]


@exercise("6.9a-1", "make_rules")
def check_make_rules(fn):
    r = exercise_rng(1)
    hidden = cases(r)
    refs = [reference(config, mesh) for _, config, mesh in hidden]  # 学習者を呼ぶ前に（学習者版では記録した値）
    for (label, config, mesh), ref in zip(hidden, refs):
        rules = _rules_dict(call(fn, config, mesh), label)
        batch = to_mesh_spec(("batch",), rules, mesh) if "batch" in rules else None
        batch_axes = () if not batch or batch[0] is None else ((batch[0],) if isinstance(batch[0], str) else batch[0])
        want_batch = tuple(a for a in ("data", "fsdp") if mesh.shape[a] > 1)
        if "tensor" in batch_axes and mesh.shape["tensor"] > 1:
            raise Fail(f"{label}: バッチを tensor 軸でも分割しています。テンソル並列の軸のデバイスは同じサンプルを受け持つので、"
                       "バッチは data 軸と fsdp 軸だけで分割します。")
        if tuple(a for a in batch_axes if mesh.shape[a] > 1) != want_batch:
            raise Fail(f"{label}: バッチは data 軸と fsdp 軸の順に分割する決まりですが、規則の batch は"
                       f" {rules.get('batch')!r} でした。")
        got = per_device_elements(rules, config, mesh, label)
        want = per_device_elements(ref, config, mesh, label)
        more = [name for name in want if got[name] > want[name]]
        if more:
            hint = ""
            unsplit = [k for k in ("embed", "heads", "head_dim", "mlp", "vocab")
                       if k in ref and to_mesh_spec((k,), rules, mesh) != to_mesh_spec((k,), ref, mesh)]
            if unsplit == ["head_dim"]:
                hint = "ヘッドの数が割り切れないときは、ヘッドの次元（head_dim）を tensor 軸で分割できます。"
            elif unsplit:
                hint = (f"論理軸 {'・'.join(unsplit)} は、その大きさが "
                        f"{'・'.join(sorted({ref[k] for k in unsplit}))} 軸の大きさで割り切れるので分割できます。")
            raise Fail(f"{label}: {', '.join(more)} を必要以上に複製しています（1 デバイスの要素数が"
                       f" {sum(got[n] for n in more)} で、{sum(want[n] for n in more)} まで減らせます）。{hint}")
        _promised_axes(rules, ref, config, mesh, label)
    return (f"隠しの {len(hidden)} つの設定とメッシュで、どのパラメータも配置でき、論理軸ごとの分割が問題文と"
            "一致しました。")


def _promised_axes(rules: dict, ref: dict, config: Config, mesh, label: str) -> None:
    """要素数が同じでも約束と違う分割（heads の代わりに head_dim、約束より多くの軸、約束にない論理軸）を、
    論理軸ごとに名前を挙げて不正解にする。大きさ 1 のメッシュ軸は書いても書かなくても同じ（to_mesh_spec が省く）。"""
    used = dict.fromkeys(name for _, spec in _leaves(logical_axes(config)) for name in spec if name)
    for name in sorted(used, key=lambda n: n != "head_dim"):  # heads の代わりの head_dim は、その名前で先に
        got, want = to_mesh_spec((name,), rules, mesh), to_mesh_spec((name,), ref, mesh)
        if got == want:
            continue
        g = got[0] if len(got) else None
        w = want[0] if len(want) else None
        if name == "head_dim" and ref.get("heads") == "tensor":
            raise Fail(f"{label}: heads が tensor 軸の大きさで割り切れるのに、head_dim を分割しています。head_dim に回すのは heads を"
                       "分割できないときだけの決まりです。head_dim を分割すると、アテンションのスコアの内積ごとに tensor の軸での和が要ります。")
        if w is None:
            raise Fail(f"{label}: 論理軸 {name} を {g!r} に分割していますが、問題文ではこの設定とメッシュで {name} は分割しません"
                       "（複製）。問題文にない分割は、学習ステップの集団通信を変えます。")
        if _axis_set(g) > _axis_set(w):
            raise Fail(f"{label}: 論理軸 {name} を {g!r} に分割しています。問題文の分割は {w!r} だけです（それより多くの軸に分割すると、"
                       "問題文にない集団通信が学習ステップに入ります）。")
        raise Fail(f"{label}: 論理軸 {name} は {w!r} に分割する決まりですが、規則では {g!r} でした。")


def _axis_set(entry) -> set:
    """PartitionSpec の 1 次元の指定（None、軸の名前、名前のタプル）を、メッシュ軸の名前の集合に。"""
    return set() if entry is None else {entry} if isinstance(entry, str) else set(entry)
