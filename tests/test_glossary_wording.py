"""用語集（ch6/glossary.toml）の使わない言い方の規則：種類ごとに直す前の文が見つかり、同じ語の正しい使い方は
見つからないこと、つないだ文字列の継ぎ目の空白、チェックのメッセージの指示の形。学習者が読むファイルの走査と
用語集そのもの・文の長さは tests/test_glossary.py。"""
from __future__ import annotations

import re

import pytest

from ch6 import glossary, learner_text

# ---- 種類ごとに、直す前の文が見つかり、同じ語の正しい使い方は見つからないこと（issue 22, issue 29）
CAUGHT = [
    "デバイスが奇数個なら `model` 軸の長さは 1 です",                # メッシュの軸は「大きさ」
    "`lax.axis_size` は軸の長さ（デバイスの数）を返します",
    "vmap でバッチにする軸の大きさがそろっていません",              # 配列の軸は「長さ」
    "もしエラーが起きなければ、そこで大きく失敗します",            # 直訳
    "値をまとめて表す束（トレーサ）です",
    "両方とも実行されるぶんの費用がかかる",
    "命令を出す費用が目立ちます",
    "1 つのデバイス分のように見せかけます",
    "### `psum`：全デバイスの合計を、全員が受け取る",              # デバイスを人として書く
    "### `ppermute`：決めた相手に送る",
    "各デバイスが自分の行を 2 倍するだけです",
    "| シャーディングを決めるのは | あなた |",                       # 話し言葉
    "ちなみに、ここで",
    "素直に考えると「A を集める」です",
    "ほんのいっときとはいえ",
    "本物の GPU / TPU でないと",                                     # 用語の揺れ
    "集団演算を入れる",
    "各デバイスのブロックは (2,) です",
    "自分のブロック → 全員のブロック",
    "保存される活性化のバイト数",
    "活性のメモリ",
    "MLP の forward（推論）を",
    "backward では勾配を",
    "前向きの活性値を保存します",
    "同じ鍵を全デバイスに渡し",
    "バッチを data 軸で分け、パラメータは複製",
    "配列を複数のデバイスに分けて置く",
    "パラメータを P() に置き、",
    "シャーディングの置き方を決めます",                             # issue 19・22 の言い換え
    "配列の断片を受け取ります",
    "詰め物をして長さをそろえます",
    "旧式の API です",
    "各台で同じコードを動かします",
    "よくある誤りを見ます",
    "コーディネータの住所",
    "プロセスの顔合わせ",
    "リポジトリの根",
    "3 手目の送受信",
    "工場関数でステップを作ります",
    "ハートビートの見張り",
    "正直に比べます",
    "約束を本当にする",
    "勾配の通り抜け",
    "vmap の下の lax.cond",
    "配置を伝えます",
    "2 層目ごとに",
    # issue 29 §2: 近い言い換え
    "行をデバイスの数で 8 つに分けます",
    "バッチは 4 つのシャードに分かれています",
    "パラメータはすべてのデバイスに置かれています",
    "x 軸だけを手書きにし、y 軸はコンパイラに任せます",
    "教材の 3 節で見たとおり",
    "レッスンの最後に",
    "本文の表で確かめます",
    "送り元のデバイスの番号",
    "一時メモリが増えます",
    "勾配のノルムを 1 に切り詰めます",
    "返り値はタプルです",
    "numpy の配列に変換します",
    "専門家並列では、トークンを all-to-all で送ります",
    "専門家混合の層",
    "各段が 2 層を受け持ちます",
    "モデル並列では重みを列で分割します",
    "2 周回目の入力",
    "ステップの費用とメモリ",
    "数字で並列化を選ぶ",
    "容量を超えたトークンは落ちます",
    "落ちたトークンを数える",
    "ルーターがエキスパートを選びます",
    "ユーザーの関数",
    "チェッカーが確かめます",
    "スケジューラーの設定",
    # issue 29 §3: 直訳
    "vmap が行を回すので",
    "勾配に pmean をかけても値は変わりません",
    "更新を複製のパラメータに当てる",
    "手元の行だけで終わります",
    "実行時にエラーになります",
    "JAX は「軸が足りない」と言っています",
    "上で印刷した値",
    "機械を 2 台つなぐ",
    "デバイスの仕事は行列積です",
    "どちらが得かを数えます",
    # issue 29 §6: 話し言葉、人として書く、英語、訳しすぎ
    "なので、ここでは 2 を使います",
    "全部のデバイスで同じです",
    "ふつうの Python の for です",
    "わざと小さい値にします",
    "試してみてくださいね",
    "jit で包むのがおすすめです",
    "手書きループとサヨナラする",
    "8 個のデバイスが働いています",
    "JAX がエラーで教えてくれます",
    "デバイスたちは同じプログラムを実行します",
    "process 0 だけが表示します",
    "attention のスコア",
    "XLA の核",
    "閉包に取り込まれた値",
    # issue 29 §7, §8
    "期待 (8, 3)、実際 (3, 8)",
    "持ち主のない部分を灰色で塗ります",
    "色はプロセスを表します",
    "赤の箱がデバイス 0 です",
    "✔ 一致",
    "shape (8, 3) <- 元の形",
    # docstring と「分け、」「分けました」（6.3b、6.4 の解答で見つかったもの）
    "結果を行（0 軸）で分けました",
    "いちばん長い軸を 'data' で分け、ほかは複製して",
    "6.8b 節のオンラインソフトマックスと同じ測り直しで",
    # issue 39: 置く（シャーディング）、送り先、台、ノートブック（本編）、注意する、ブック、章、括弧の入れ子
    "配列は `jax.device_put` でそのチップに置きます",
    "配列とメッシュを CPU の模擬デバイス 8 個に置き、",
    "グローバル配列を `P(\"data\")` で置く",
    "渡された `mesh` の `NamedSharding` で置く。",
    "配列を mesh の上で spec のとおりに分割して置く",
    "置く前の型: float32[128,3]  / 置いた後の型: float32[128@data,3]",
    "エラーにならずに置けるのはどれですか。",
    "番号を同じ送り先に送る",
    "n = 1 は通信がないので、いつも計算律速で 1 台です。",
    "axes と form を省いて呼ぶと {default} 台で",
    "ノートブックの 5 節の `pmap_step` は",
    "**前提**：6.1〜6.4 のノートブック（6.3c を含む）。",
    "ノートブックの squared_errors と同じ更新なので",
    "位置 $0..t$ のキーと値（K/V）に注意します。",
    "K/V をキャッシュの次の位置に書いて、キャッシュ全体に注意する",
    "注意のスコアの内積ごとに tensor の軸での和が要ります",
    "ブックの形とステップ全体の形を取り違えています。",
    "1 系列: 6.7 GB（ブック: 6.7 GB）",
    "すべてのセルが動きますが、3 章の送るバイトはすべて 0 です",
    "クエリは位置 $t$ 以下のキーだけを見ます（**因果マスク**（causal mask））。",
    "（デバイスごとに積み重なる。[0] が基準と一致（誤差 1e-6 以内））",
    # issue 46: N 方向、ベストエフォート、トレードオフ、オプティマイザ、weight decay、木、台本、約束、軸の長さ
    "テンソル並列 4 方向で、通信の時間 ÷ 計算の時間は",
    "テンソル並列 {ways} 方向で",
    "`wq`・`wo` と MLP は $t$ 方向に分割したまま",
    "部分和を model 方向に足す",
    "この見積もりはベストエフォートです。",
    "メモリを減らす代わりに通信が増える、という **トレードオフ** です。",
    "オプティマイザの状態",
    "この最適化器（weight decay つきの adamw など）は",
    "状態は保存したのと同じ辞書の木で返してください。",
    "値は木全体の `lax.psum` と同じです",
    "台本どおりの損失を返す小さなステップ",
    "`out_specs=P()` は「全デバイスで同じ値」という約束です。",
    "論理軸 heads は tensor に分割する約束ですが",
    "（model 軸の長さが 1 なので通信が現れず）",
    "'model' 軸の長さが 1 なら",
    "q や k を集め直さず、out_sharding で部分和の all-reduce だけにしましょう。",   # チェックのメッセージでだけ
    "6.11a 節の 4 のトレースでは",                                              # ほかのノートブックの節の書き方
    "同じ型の計算は 6.7 でも、LLaMA-3-70B と TPU v5p の例で確かめました。",        # モデルの名前は Meta の書き方
    "ヘッドが tensor で割り切れない設定:",                                     # メッシュの軸に「軸」を付けない（メッセージ）
    "規則が head_dim を tensor で 4 個に分割しています。",
    "8 デバイスの pmap で、デバイスごとの平均を pmean しています。",            # デバイスを数える形（メッセージ）
    "サンプルの軸は vmap で回します。",                                        # vmap はループを作らない
    "外側の段から組、組の中の点、Y の点の順に回します。",
    "このカーネルでは、持ち主は owner[d.id] で調べます。",                      # 擬人化（メッセージ）
]
ALLOWED = [
    "6.11a の 4 節のトレースでは",
    "6.3c の 2 節で見たとおり",
    "先頭軸の長さ（4 * n_devices）がデバイスの数と違います",         # 配列の軸の長さ
    "`model` 軸の大きさが 1 なら、通信は入りません",
    "ヒストグラムのビンの分け方は bins で決めます",                   # issue 19
    "マイクロバッチへの分け方は自由です",
    "ステップのコストとメモリ",
    "通信を自分で書きます",
    "自分の環境でどう数えられるかは",
    "活性化関数は tanh です",
    "2 層の MLP の順伝播（forward）を",
    "1F1B（one forward, one backward）は",
    "K/V のブロックを ppermute で回します",
    "活性値を保存します",
    "乱数キーを分けます",
    "データを data 軸で分割し、パラメータは複製します",
    "行数はデバイスの数で割り切れる必要があります",
    "block_until_ready() で待ちます",
    "ファイルを `data/` に置きます",
    "self-attention の層",
    "色分けとハッチで示します",
    # issue 29: 同じ語の正しい使い方
    "値の範囲を 10 個のビンに分けます",                               # 分ける（ヒストグラム）
    "トークンをエキスパートに振り分けます",
    "2 つの場合を見分けます",
    "軸を後ろに置きます",                                             # 置く（位置）
    "バッチ軸を最後に置いたとき（out_axes=2）",
    "ファイルをリポジトリのフォルダに置きます",
    "手書きのループと比べます",                                       # 手書き（コード）
    "x 軸だけを手動にし、y 軸はコンパイラに任せます",
    "本編の 3 節で見たとおり",
    "メッセージ本文",
    "送信元のデバイスの番号",
    "一時領域が増えます",
    "エラーの表示は 80 文字で切り詰めます",
    "勾配のノルムを 1 にクリップします",
    "戻り値はタプルです",
    "NumPy の配列に変換します（`import numpy as np`）",
    "`numpy.testing` で比べます",
    "エキスパート並列では、トークンを all-to-all で送ります",
    "混合エキスパート（Mixture-of-Experts, MoE）の層",
    "各ステージが 2 層を受け持ちます",
    "vmap を 3 段重ねます",
    "テンソル並列（TP）では重みを列で分割します",
    "テンソル並列とパイプライン並列をまとめてモデル並列と呼びます",
    "インターリーブでは 2 周目の入力が",
    "有効数字 3 桁",
    "容量を超えたトークンはドロップします",
    "落とし穴",
    "bf16 では精度が落ちます",
    "勾配に pmean を適用しても値は変わりません",
    "マスクを掛けてから足します",                                     # 掛ける（掛け算）
    "デバイスに 1 行ずつ割り当てます",
    "コンパイルに時間をかけます",
    "実行時間を測ります",
    "スカラーの損失",
    "マスター重みは fp32 です",
    "# このセルはわざとエラーを出します",
    "（わざと起こしたエラーです）",
    "プロセス 0 だけが表示します",
    "関数が自分自身を呼んでいませんか",
    "次のバイトを当てる（予測する）",
    "アテンション（attention）のスコア",
    "`jax.nn.dot_product_attention` を使います",
    "XLA のカーネル",
    "持ち主のない部分はハッチ（斜線）で示します",
    "✅ 一致",
    "shape (8, 3) → 元の形",
    "バッチを k 個の **マイクロバッチ**（microbatch）に分け、順に勾配を求めて足します",
    "層を前から順にステージに分け、境目の活性値だけを隣へ送ります",
    # issue 39: 同じ語の正しい使い方
    "配列は `jax.device_put` でそのチップに配置します",
    "チップのルーフラインに置くと、どちらも斜めの部分にあります",            # 図の上の位置
    "バッチを出力の 1 軸目に置くので",
    "jit の中に shard_map を置く",
    "`pcast` を scan の前に置くと",
    "中間結果をメモリに置くバックエンド",
    "そのまま静的なホスティングに置けます",
    "送信先のデバイスの番号",
    "1 台のマシンで 1 つのプロセスを動かすとき",
    "何台ものホストにまたがる TPU Pod",
    "{len(cluster['hosts'])} 台 × {n} プロセス",
    "台帳に記録します",
    "n = 1 は通信がないので、いつも計算律速でチップ 1 個です。",
    "このノートブックの 3 節で",
    "本編の 5 節の `pmap_step` は",
    "演習のノートブックの節",
    "**前提**：6.1〜6.4 の本編（6.3c を含む）。",
    "軸を増やしても下がらないことに注意してください",
    "キャッシュ全体の K/V でアテンションを計算する",
    "スケーリングブックの形とステップ全体の形",
    "全画像で共通の「コードブック」の点との距離",
    "スケーリングブック第 5 章、本の第 7 章",
    "すべてのセルが動きますが、3 節の送るバイトはすべて 0 です",
    "クエリは位置 $t$ 以下のキーだけを見ます（**因果マスク**、causal mask）。",
    "備考に理由（例「ファイルが壊れていて読めません（JSON の 53 行目）。」）が出ます",
    "（リングの式 = {round(ring['FSDP（集め直す）'])}）",
    "等しいときは計算律速とみなす決まり（>=）なので",                 # 束（トレーサ）の規則
    # issue 46: 同じ語の正しい使い方
    "合計をリンクの本数と 2 方向で割った値",                          # 方向（向き）
    "半分ずつ逆向きに（2 方向へ同時に）",
    "双方向のリングで送ります",
    "1 方向は 1 本のリンクです",
    "テンソル並列 4 並列で、通信の時間 ÷ 計算の時間は",
    "メモリを減らす代わりに通信が増える兼ね合いです",
    "最適化器（optimizer）の状態",
    "重み減衰（weight decay）つきの adamw",
    "all-reduce の実装には木構造のものもあります",
    "pytree 全体の `lax.psum` と同じです",
    "先頭軸の長さ（4 * n_devices）",
    "`model` 軸の大きさが 1 なので通信が現れません",
    "スケーリングブックの第 6 章「Training LLaMA 3 on TPUs」、2025",               # 参考文献の題名は発表されたとおり
    "ヘッドの数が tensor 軸の大きさで割り切れない設定:",                          # 軸を付けたメッシュの軸
    "軸 seq の大きさは jax.device_count() と同じです。",
    "バッチを 'data' で分割します。",                                           # 「X で分割」は講座の書き方
    "model_size の大きさで割ります。",                                          # 軸の名前ではない識別子
    "デバイス 8 個の pmap で、1 デバイスあたりのメモリは 1/8 です。",            # 数えるときは「デバイス N 個」
    "1 デバイスの値と比べます。",
    "サンプルの軸は vmap でバッチにします。",
    "range(1, n) で回してください。",                                          # Python のループは「回す」でよい
    "どのプロセスのデバイスかは owner[d.id] で調べます。",
]


# ---- つないだ文字列の継ぎ目（issue 46）: "… w と" "KV …" は「w とKV」と表示される
JOINS_CAUGHT = [
    'raise Fail("重みの 1 値のバイト w と"\n           "KV キャッシュの読み込みを数えます。")',
    'MSG = (f"{n} 個の組は"\n       "B をいくら増やしても計算律速になりません。")',
    'msg = ("結果は x"  # コメントをはさんでも\n       "でした。")',
    'msg = ("`psum`"\n       "で足します。")',
]
JOINS_ALLOWED = [
    'raise Fail("重みの 1 値のバイト w と "\n           "KV キャッシュの読み込みを数えます。")',
    'MSG = ("計算律速になりません。"\n       "B を増やしても同じです。")',
    'msg = ("組は {b}"\n       "でした。")',
    'msg = "行は\\n"\n',
    'a = "組は"\nb = "B です"\n',                       # 別の文字列（つないでいない）
    'msg = f"値は {x}" f"でした"',
    'msg = ("改行のあと\\n"\n       "B です")',
]




@pytest.mark.parametrize("src", JOINS_ALLOWED)
def test_joins_with_a_space_or_punctuation_are_allowed(src):
    assert not learner_text.string_joins(src), learner_text.string_joins(src)


# ---- f 文字列の {式} の継ぎ目（issue 46、editor2_b K2）: 値が英数字で終わると分かる式だけを見る
FSTRING_CAUGHT = [
    # 引数 what に、同じファイルの呼び出しが英字の名前を渡す（s6_7/common.py の「accumulated_value_and_gradは」）
    'def pair(out, what):\n    raise Fail(f"{what}は 2 つ組を返してください。")\n\n'
    'def check(fn):\n    pair(fn(), "accumulated_value_and_grad")\n',
    # 代入の片方が型の名前（s6_8a の「tupleでした」「NoneTypeでした」）
    'def f(out):\n    got = f"形 {out.shape} の配列" if hasattr(out, "shape") else type(out).__name__\n'
    '    raise Fail(f"2 つ組のはずが、{got}でした。")\n',
    'msg = f"件数は {len(xs)}です。"',                       # 数を返す関数
    'msg = f"値は {x:.3g}でした。"',                        # 数の書式
    'msg = f"名前は {name!r}です。"',                        # repr
    'cost = "1 デバイスが受け取るバイト"\nmsg = f"値が合っても{cost}。"',   # 値が英数字で始まる
]
FSTRING_ALLOWED = [
    'msg = f"{what} は 2 つ組です。"',                        # 空白がある
    'def e(got, what):\n    raise Fail(f"{what}の {got}")\n\ndef c():\n    e(1, "sgd_step の結果")\n',  # 値は日本語で終わる
    'msg = f"{what}は {x}"',                                  # 値の分からない名前は見ない
    'msg = f"{what}{sep(what)}で止まりました。"',              # 空白を足す関数は見ない
    'msg = f"形 {fmt(shape)}（{n} 行）です。"',                # 全角の括弧との間
    'msg = f"形 {want.shape}・int32 の配列"',                  # 中黒は区切り
    'msg = f"受け取ったのは {describe(got)}です。"',            # 値の分からない関数
]


@pytest.mark.parametrize("src,seams", [(src, "string_joins") for src in JOINS_CAUGHT]
                         + [(src, "fstring_seams") for src in FSTRING_CAUGHT])
def test_a_missing_space_at_a_seam_is_caught(src, seams, tmp_path):
    # 文字列の断片の継ぎ目と、f 文字列の {式} の継ぎ目: どちらも 1 か所を見つけ、用語の走査が空白の誤りとして出す
    found = getattr(learner_text, seams)(src)
    assert len(found) == 1, found
    p = tmp_path / "m.py"
    p.write_text(src + "\n", encoding="utf-8")
    hits = glossary.scan_file(p)
    assert len(hits) == 1 and "空白" in hits[0].use, hits


@pytest.mark.parametrize("src", FSTRING_ALLOWED)
def test_fstring_expressions_with_a_space_or_a_japanese_value_are_allowed(src):
    assert not learner_text.fstring_seams(src), learner_text.fstring_seams(src)


def test_fstring_seams_read_the_calls_in_the_other_files_of_the_folder(tmp_path):
    """s6_7/common.py の pair は、ほかのファイル（dp_chips.py など）から名前を渡されて呼ばれる。"""
    (tmp_path / "common.py").write_text('def pair(out, what):\n    raise Fail(f"{what}は 2 つ組です。")\n',
                                        encoding="utf-8")
    (tmp_path / "check.py").write_text('from .common import pair\n\ndef check(fn):\n'
                                       '    pair(fn(), "fewest_microbatches")\n', encoding="utf-8")
    hits = glossary.scan_file(tmp_path / "common.py")
    assert [h.word for h in hits] == ["{what}|は 2 つ組"], hits


def test_joins_are_reported_in_notebook_code_cells_by_the_md_line(tmp_path):
    md = tmp_path / "n.md"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n```{code-cell} ipython3\n"
                  'print("組は"\n      "B です")\n```\n', encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    assert [h.where.split("/")[-1] for h in glossary.scan_file(tmp_path / "n.ipynb")] == ["n.md:10"]


def test_the_instruction_form_rule_applies_to_check_messages_only():
    """チェックのメッセージの指示は「〜してください」の 1 つの形（issue 46）。本編の「見てみましょう」はそのまま。"""
    [rule] = [r for r in glossary.rejected() if r.scope and "ましょう" in r.pattern]
    assert rule.matches("余分な通信をなくしましょう。") and not rule.matches("余分な通信をなくしてください。")
    for path in ("ch6/checks/s6_1/rbf_features.py", "ch6/explain.py", "ch6/checking.py"):
        assert re.search(rule.scope, path), path
    for path in ("notebooks/6_1_vmap.md", "solutions/6_1_vmap.md", "ch6/show.py", "README.md"):
        assert not re.search(rule.scope, path), path


def _hits(sentence):
    return glossary.scan({"cells": [{"cell_type": "markdown", "source": sentence}]})


@pytest.mark.parametrize("sentence", CAUGHT)
def test_each_kind_of_rejected_wording_is_caught(sentence):
    assert _hits(sentence), sentence


@pytest.mark.parametrize("sentence", ALLOWED)
def test_ordinary_uses_of_the_same_words_are_allowed(sentence):
    assert not _hits(sentence), _hits(sentence)


def test_every_rule_is_tested_on_an_old_sentence_and_its_allow_list_on_an_allowed_use():
    missing = []
    for r in glossary.rejected():
        if not any(r.matches(s) for s in CAUGHT):
            missing.append(f"CAUGHT: {r.shown or r.pattern}")
        if r.allow and not any(re.search(r.pattern, s) and not r.matches(s) for s in ALLOWED):
            missing.append(f"ALLOWED: {r.shown or r.pattern}")
    assert not missing, "\n".join(missing)
