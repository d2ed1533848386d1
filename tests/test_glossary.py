"""用語集（ch6/glossary.toml）: GLOSSARY.md と一致し、学習者が読む文字列は使わない言い方を含まない。"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ch6 import glossary, learner_text, sentences

ROOT = Path(__file__).resolve().parent.parent
LEARNER_FILES = glossary.learner_files(ROOT)
IDS = [p.relative_to(ROOT).as_posix() for p in LEARNER_FILES]


def test_glossary_md_is_generated_from_the_toml():
    assert (ROOT / "GLOSSARY.md").read_text(encoding="utf-8") == glossary.markdown(), \
        "GLOSSARY.md is stale: python -m ch6.glossary --write GLOSSARY.md"


def test_one_term_per_concept():
    ja = [t.ja for t in glossary.terms()]
    en = [t.en.lower() for t in glossary.terms()]
    assert len(ja) == len(set(ja)) and len(en) == len(set(en))
    for t in glossary.terms():
        assert t.definition.endswith("。") and len(t.definition) < 120, t.ja


def test_rejected_list_covers_what_the_editors_found():
    text = " ".join(r.pattern for r in glossary.rejected())
    for word in ("集団演算", "置き方", "断片", "詰め物", "旧式", "各台", "つまずき", "ランチャー", "住所", "顔合わせ",
                 "手目", "工場関数", "見張り", "正直に", "切れ端",
                 # issue 29
                 "送り元", "一時メモリ", "切り詰め", "返り値", "numpy", "専門家", "周回", "費用", "数字", "落ち",
                 "手元", "実行時", "印刷", "機械", "仕事", "閉包", "ルーター", "ユーザー", "チェッカー", "✔",
                 # issue 39
                 "送り先", "チップ", "置け", "台", "ノートブック", "注意", "ブック", "章", "（"):
        assert word in text, word
    for r in glossary.rejected():
        re.compile(r.pattern)
        for t in glossary.terms():
            assert not re.search(r.pattern, t.ja), f"the glossary term {t.ja} is itself rejected by {r.pattern}"


def test_the_decisions_of_issue_29_are_written_down():
    ja = {t.ja for t in glossary.terms()}
    for term in ("分割／配置", "手動", "本編", "送信元／送信先", "一時領域", "クリップ", "戻り値", "NumPy",
                 "エキスパート並列", "混合エキスパート（MoE）", "ステージ", "テンソル並列（TP）", "インターリーブ",
                 "コスト", "数値", "ドロップ", "適用する", "ルータ"):
        assert term in ja, term
    titles = " ".join(r["title"] + r["text"] for r in glossary.rules())
    assert "長音" in titles and "スカラー" in titles and "本編" in titles


# ---- どの文字列を読むか

def test_scan_reads_markdown_comments_strings_and_outputs():
    nb = {"cells": [{"cell_type": "markdown", "source": "集団演算です"},
                    {"cell_type": "code", "source": 'x = "旧式の API"  # 各台で\nprint("ok")',
                     "outputs": [{"output_type": "stream", "text": "集めたら詰め物を捨てる\n"},
                                 {"output_type": "execute_result", "data": {"text/plain": "'断片'"}}]}]}
    found = glossary.scan(nb)
    assert [f.split(":")[0] for f in found] == ["セル 0", "セル 1", "セル 1", "セル 1", "セル 1"], found
    words = " ".join(found)
    for word in ("「集団演算」", "「旧式」", "「各台」", "「詰め物」", "「断片」"):
        assert word in words, (word, found)


def test_a_hit_names_the_word_that_triggered_it_and_the_replacement():
    [hit] = glossary.scan_text("返り値は配列です")
    assert "「返り値」" in hit and "戻り値" in hit


def test_code_strings_skip_docstrings_and_read_f_strings_as_templates():
    src = ('def f(x):\n    """旧式の説明（学習者は読まない）"""\n'
           '    return f"期待 {x.shape}、実際 {x}"\n'
           'LABEL = "English only"\n')
    texts = learner_text.strings(src)
    assert texts == [(3, "期待 {x.shape}、実際 {x}")], texts


def test_notebook_code_cells_read_docstrings_too():
    """ノートブックの関数の docstring は学習者がセルの中で読むので、コードセルでは読む（.py のチェックでは読まない）。"""
    src = 'def f(x):\n    """割り切れる最初の軸を \'data\' で分ける"""\n    return x\n'
    assert (2, "割り切れる最初の軸を 'data' で分ける") in learner_text.code_texts(src)
    assert glossary.scan({"cells": [{"cell_type": "code", "source": src}]})


def test_a_notebook_with_a_twin_is_reported_by_the_md_line(tmp_path):
    md = tmp_path / "n.md"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n本文はここ\n\n"
                  "```{code-cell} ipython3\n---\ntags: [nbval-ignore-output]\n---\nx = 1\n"
                  "print(\"返り値は 1\")  # 各台で\n```\n\nふつうの段落\n", encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "n.outputs.txt").write_text("# header\n\n--- コードセル 1: x = 1\n数字は 1\n", encoding="utf-8")
    where = sorted(h.where.split("/")[-1] + " " + h.word for h in glossary.scan_file(tmp_path / "n.ipynb"))
    assert where == ["n.md:15 各台", "n.md:15 返り値", "n.md:18 ふつうの", "n.md:8 本文", "n.outputs.txt:4 数字"], where


def test_an_exercise_notebook_is_reported_by_the_line_of_the_solution_md_it_is_made_from(tmp_path):
    """exercises/ は solutions/X.md から作られるので、当たりは著者が直す .md の行で示す（生成された文はセルのまま）。"""
    import json

    (tmp_path / "solutions").mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "solutions" / "6_1_x.md").write_text("# 見出し\n\n段落\n\n本文はここ\n", encoding="utf-8")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": s} for s in ("# 見出し", "本文はここ", "ふつうの文")]
    (tmp_path / "exercises" / "6_1_x.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    hits = glossary.scan_file(tmp_path / "exercises" / "6_1_x.ipynb")
    where = [(h.where.replace(tmp_path.as_posix() + "/", ""), h.word) for h in hits]
    assert where == [("solutions/6_1_x.md:5（exercises/6_1_x.ipynb セル 1）", "本文"),
                     ("exercises/6_1_x.ipynb セル 2", "ふつうの")], where


def test_the_cli_scans_a_list_of_files(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text('MSG = "送り元のデバイス"\n', encoding="utf-8")
    assert glossary.main(["--scan", str(p)]) == 1
    out = capsys.readouterr().out
    assert "m.py:1: 「送り元」" in out and "送信元" in out


def test_the_learner_files_include_checks_explain_figures_and_readme():
    rel = set(IDS)
    for path in ("README.md", "ch6/explain.py", "ch6/draw/values.py", "ch6/checks/s6_1/rbf_features.py",
                 "notebooks/6_1_vmap.ipynb", "solutions/6_1_vmap.ipynb", "exercises/6_1_vmap.ipynb"):
        assert path in rel, path
    assert "ch6/glossary.py" not in rel


@pytest.mark.parametrize("path", LEARNER_FILES, ids=IDS)
def test_every_learner_string_uses_the_glossary(path):
    hits = [str(h) for h in glossary.scan_file(path)]
    assert not hits, "\n".join(hits[:20]) + (f"\n… {len(hits)} in all" if len(hits) > 20 else "")


def test_readme_is_scanned_up_to_its_english_section(tmp_path):
    p = tmp_path / "README.md"
    p.write_text("# 講座\n\n返り値を見ます。\n\n## English\n\nring attention, process 0\n", encoding="utf-8")
    assert [h.word for h in glossary.scan_file(p)] == ["返り値"]


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
]
ALLOWED = [
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


@pytest.mark.parametrize("src", JOINS_CAUGHT)
def test_a_missing_space_at_a_join_of_string_pieces_is_caught(src, tmp_path):
    p = tmp_path / "m.py"
    p.write_text(src + "\n", encoding="utf-8")
    hits = glossary.scan_file(p)
    assert len(hits) == 1 and "空白" in hits[0].use, hits


@pytest.mark.parametrize("src", JOINS_ALLOWED)
def test_joins_with_a_space_or_punctuation_are_allowed(src):
    assert not learner_text.string_joins(src), learner_text.string_joins(src)


def test_joins_are_reported_in_notebook_code_cells_by_the_md_line(tmp_path):
    md = tmp_path / "n.md"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n```{code-cell} ipython3\n"
                  'print("組は"\n      "B です")\n```\n', encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    assert [h.where.split("/")[-1] for h in glossary.scan_file(tmp_path / "n.ipynb")] == ["n.md:10"]


def test_the_instruction_form_rule_applies_to_check_messages_only():
    """チェックのメッセージの指示は「〜してください」の 1 つの形（issue 46）。本編の「見てみましょう」はそのまま。"""
    [rule] = [r for r in glossary.rejected() if r.scope]
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


# ---- 用語集は自分の決まりを守る（issue 39: 容量係数の定義が「専門家」「送り元」「落ちる」を使っていた）

def _own_words(text):
    """用語集の文から、使わない言い方を挙げているだけの部分（「…」の中と「…とは書かない」の文）を除く。"""
    text = re.sub(r"「[^」]*」", "「」", text)
    return "".join(s for s in re.findall(r"[^。]*。?", text) if "とは書かない" not in s and "とは書かず" not in s)


@pytest.mark.parametrize("term", glossary.terms(), ids=[t.ja for t in glossary.terms()])
def test_each_definition_uses_the_glossary(term):
    assert not glossary.scan_text(_own_words(term.definition)), glossary.scan_text(_own_words(term.definition))


def test_the_writing_rules_use_the_glossary():
    for r in glossary.rules():
        assert not glossary.scan_text(_own_words(r["text"])), (r["title"], glossary.scan_text(_own_words(r["text"])))


def test_own_words_drops_only_the_mentions():
    assert _own_words("関数が返す値。返り値とは書かない。") == "関数が返す値。"
    assert _own_words("「手書き」は手で書いたコードだけに使う。") == "「」は手で書いたコードだけに使う。"
    assert glossary.scan_text(_own_words("専門家 1 つが受け取るトークンの上限。"))


# ---- 文の長さ（issue 39）: 学習者が読む文は表示される形で 120 文字まで。100 文字を超える文は --long で一覧

def test_a_sentence_is_measured_as_rendered():
    src = "[公式ドキュメント](https://docs.jax.dev/en/latest/201/sharding.html) の `jax.device_put` と $2(n-1)/n$ を **見ます**。"
    [(_, raw)] = sentences.split_sentences(src)
    assert sentences.rendered(raw) == "公式ドキュメント の jax.device_put と 2(n-1)/n を 見ます。"
    assert sentences.rendered("![図](fig.png)画像の<br>後<!-- メモ -->") == "画像の後"
    assert sentences.rendered("日本語の行が\n折り返しても続きます。English\nwraps") == "日本語の行が折り返しても続きます。English wraps"


def test_inline_code_that_looks_like_a_myst_role_is_code():
    """`{V:x}` は MyST のロール {role}`…` ではない（issue 46: 6.3b の 130 文字の文が、ここで 76 文字と数えられていた）。"""
    src = "型の（varying、`{V:x}`）値を足し合わせて、プリミティブ `psum_invariant` を使うからです。"
    assert sentences.rendered(src) == "型の（varying、{V:x}）値を足し合わせて、プリミティブ psum_invariant を使うからです。"
    assert sentences.rendered("{term}`シャーディング <sharding>` です") == "シャーディング です"
    assert sentences.rendered("型 `float32[2,4@y]{V:x}` に印 `{V:x}` が出ます") == "型 float32[2,4@y]{V:x} に印 {V:x} が出ます"


def test_a_paragraph_wrapped_over_lines_is_one_sentence(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("あ" * 60 + "、\n" + "い" * 60 + "、\n`code` と" + "う" * 10 + "です。\n", encoding="utf-8")
    [s] = sentences.sentences_in(p)
    assert s.where.endswith(":1") and len(s.text) == 60 + 1 + 60 + 1 + 1 + 4 + 2 + 10 + 3, s  # 改行は 1 つの空白


def test_sentences_end_at_the_period_outside_quotes_and_parentheses():
    src = "JAX は「軸が足りません。」と言います（理由は 2 つ。後で見ます）。次の文です。`a。b` も 1 つです。"
    assert [s for _, s in sentences.split_sentences(src)] == [
        "JAX は「軸が足りません。」と言います（理由は 2 つ。後で見ます）。", "次の文です。", "`a。b` も 1 つです。"]


def test_markdown_units_split_items_headings_and_cells_and_skip_code_and_math():
    md = ("# 見出しです\n\n段落の 1 行目、\n2 行目です。\n- 項目 A です\n- 項目 B です\n\n"
          "| 列 | 説明 |\n|---|---|\n| `a|b` | セルです |\n\n```bash\necho 日本語のコード。\n```\n\n"
          "$$\n\\text{式の中の日本語}\n$$\n<!-- 日本語のコメント -->\n> **引用**：引用です。\n")
    units = sentences.markdown_units(md)
    assert units == [(1, "見出しです"), (3, "段落の 1 行目、\n2 行目です。"), (5, "項目 A です"), (6, "項目 B です"),
                     (8, "列"), (8, "説明"), (10, "`a|b`"), (10, "セルです"), (20, "**引用**：引用です。")], units


def test_a_reference_list_entry_is_not_measured_but_a_citation_in_a_sentence_is(tmp_path):
    p = tmp_path / "doc.md"
    entry = ("- Jacobs ほか 2023、\"DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence "
             "Transformer Models\"、[arXiv:2309.14509](https://arxiv.org/abs/2309.14509)")
    sentence = ("もう 1 つの方法は、アテンションの間だけ分割する軸を入れ替えることです（Jacobs ほか, \"DeepSpeed Ulysses: "
                "System Optimizations for Enabling Training\", https://arxiv.org/abs/2309.14509）。")
    p.write_text(f"## 参考文献\n\n{entry}\n\n{sentence}\n", encoding="utf-8")
    assert sentences.is_reference(entry) and not sentences.is_reference(sentence)
    assert [(s.where.split(":")[-1], len(s.text) > 120) for s in sentences.sentences_in(p)] == [("1", False), ("5", True)]


def test_sentences_in_a_notebook_twin_are_its_markdown_only(tmp_path):
    md = tmp_path / "n.md"
    long = "あ" * 130 + "。"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\n---\n\n# 見出し\n\n短い文です。" + long + "\n\n"
                  "```{code-cell} ipython3\nprint(\"" + long + "\")  # " + long + "\n```\n", encoding="utf-8")
    (tmp_path / "n.ipynb").write_text("{}", encoding="utf-8")
    found = sentences.sentences_in(tmp_path / "n.ipynb")
    assert [(s.where.split("/")[-1], len(s.text)) for s in found] == [("n.md:6", 3), ("n.md:8", 6), ("n.md:8", 131)]


def test_check_messages_are_measured_per_sentence_with_fields_as_four_characters(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('def f(x):\n    raise Fail(f"形が {x.shape} でした。" "直します。")\n', encoding="utf-8")
    assert [s.text for s in sentences.sentences_in(p)] == ["形が 〇〇〇〇 でした。", "直します。"]


def test_the_cli_lists_long_sentences_and_fails_over_the_limit(tmp_path, capsys):
    p = tmp_path / "doc.md"
    p.write_text("短い文です。\n\n" + "い" * 110 + "。\n\n" + "う" * 125 + "。\n", encoding="utf-8")
    assert glossary.main(["--long", str(p)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [ln[:2] for ln in out] == ["  ", "!!"] and "doc.md:3: 111 字" in out[0] and "doc.md:5: 126 字" in out[1]
    p.write_text("い" * 110 + "。\n", encoding="utf-8")
    assert glossary.main(["--long", str(p)]) == 0


def test_lessons_solutions_and_messages_stop_at_100_characters_other_pages_at_120():
    for where in ("notebooks/6_1_vmap.md:3", "solutions/6_7_cost_memory.md:9", "ch6/checks/s6_1/rbf_features.py:20",
                  "ch6/explain.py:5"):
        assert sentences.limit_for(where) == 100, where
    for where in ("README.md:38", "docs/workshop.md:119", "site/teachers.md:61", "GLOSSARY.md:3"):
        assert sentences.limit_for(where) == 120, where


LENGTH_FILES = sentences.length_files(ROOT)
@pytest.mark.parametrize("path", LENGTH_FILES, ids=[p.relative_to(ROOT).as_posix() for p in LENGTH_FILES])
def test_no_learner_sentence_is_over_its_limit(path):
    over = [str(s) for s in sentences.sentences_in(path) if len(s.text) > sentences.limit_for(s.where)]
    assert not over, "\n".join(over)


