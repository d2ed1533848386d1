#!/usr/bin/env python3
"""学習者版を作る: 解答を含まない配布物（フォルダ、zip、tar.gz、望めば 1 コミットの git リポジトリ）。

    python tools/learner_edition.py [--out build/learner] [--name ch6-learner] [--git]
    make learner-edition [OUT=build/learner] [GIT=1]

**何を入れるか。** 学習者が使うものだけです: 本編（``notebooks/*.ipynb``、MyST の双子と出力の文字版は除く）、
演習（``exercises/``、そのまま）、講座のパッケージ ``ch6`` の wheel（``packages/``）、``requirements.txt``、
``.python-version``、用語集（``GLOSSARY.md``）、学習者向けの ``README.md`` と ``Makefile``（``make setup`` /
``make lab`` / ``make smoke``）、JupyterLab の設定（``.jupyter/``）。

**何を入れないか。** ``solutions/``（解答例）、``tests/``（チェックの単体テストは正しい答えを含みます）、
``tools/``（``mutants_equivalent.txt`` は解答の書き換えと理由の一覧です）、``docs/``（先生向けの手引きは演習ごとの
「説明すること」を含みます）、``site/``、``.ci/``、作者向けの ``CONTRIBUTING.md``。本編の「解答例は
``solutions/…``」という案内は、学習者版にはないので消します。

**パッケージはソースでなく wheel で配ります。** ``ch6/checks/`` には参照の答え（期待値を計算する実装）があります。
ソースのフォルダを置くと、JupyterLab のファイルブラウザに並びます。wheel は ``make setup`` が ``.venv`` に入れ、
``.venv`` は隠しフォルダです。wheel には ``ch6/edition.json``（``{"edition": "learner"}``）を入れます。
これがあると ``import ch6`` が見張り（:mod:`ch6.edition`）を入れ、学習者のコードから ``ch6.checks`` を読み込めなく
なります（``ch6.check`` はそのまま動きます）。wheel はこのスクリプトが zipfile で直接書くので、setuptools も
ネットワークも要りません（教室で ``pip install --no-index`` で入ります）。

**参照の実装は記録した値に置き換えます。** ``@recorded``（:mod:`ch6.recorded`）の付いた関数（解答例と同じ行を
持っていた参照と、その誤りの形）は、wheel では本体を消します（:func:`strip_recorded`）。代わりに、完全版の
チェックを 1..8 デバイスで動かして記録した値（``tools/recorded_expectations.py``）を ``ch6/recorded.json`` として
入れ、学習者版のチェックはそれを引数の要約で引きます。判定とメッセージは完全版と同じです。

**なぜ git のブランチではなくアーカイブか。** 完全版のリポジトリのブランチを配ると、履歴と他のブランチから
``solutions/`` を取り出せます。``--git`` は学習者版のフォルダに履歴のない新しいリポジトリ（1 コミット、ブランチ
``main``）を作ります。先生はそれを教室用のリポジトリに push し、学習者はそこから clone します。
"""
from __future__ import annotations

import argparse
import ast
import base64
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import recorded_expectations  # noqa: E402  （tools/ の隣のモジュール）

PACKAGE_SUFFIXES = {".py", ".cfg", ".json", ".txt", ".toml", ".gz"}  # pyproject.toml の package-data（記録したトレース *.json.gz も）と .py
EPOCH = (1980, 1, 1, 0, 0, 0)  # zip に書く時刻（同じ入力からは同じバイト列）
# 本編の solutions/ への案内: 「（解答例は `solutions/….ipynb`）」の括弧と、「解答は `solutions/…` にあります。」の文を消す
SOLUTION_POINTERS = (re.compile(r"（[^（）\n]*`solutions/[^`]*`[^（）\n]*）"),
                     re.compile(r"[^。\n]*`solutions/[^`]*`[^。\n]*。\n?"))
COPIED = ("requirements.txt", ".python-version", "GLOSSARY.md")
LEFT_OUT = ("solutions", "tests", "tools", "docs", "site", ".ci", "CONTRIBUTING.md")


@dataclass
class Edition:
    folder: Path
    wheel: Path
    archives: list[Path]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "ch6", "notebooks",
                                "exercises"], capture_output=True, text=True, check=True).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_files() -> list[Path]:
    """wheel に入れる ch6 のファイル（__pycache__ と隠しファイルを除く）。"""
    return sorted(p for p in (ROOT / "ch6").rglob("*")
                  if p.is_file() and p.suffix in PACKAGE_SUFFIXES and "__pycache__" not in p.parts
                  and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
                  and p.name not in ("edition.json", "recorded.json"))


def _zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _is_recorded(decorator: ast.expr) -> bool:
    return (isinstance(decorator, ast.Name) and decorator.id == "recorded") or (
        isinstance(decorator, ast.Attribute) and decorator.attr == "recorded")


def strip_recorded(source: str) -> tuple[str, list[str]]:
    """``@recorded`` の付いた関数の本体（docstring の後）を ``...`` に置き換えたソースと、その関数の名前。

    学習者版では印が記録した値を引くので、本体は呼ばれません。行で切り貼りするので、ほかの行（メッセージ、
    コメント）はそのままです。"""
    tree = ast.parse(source)
    found = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(_is_recorded(d) for d in node.decorator_list)]
    lines = source.splitlines(keepends=True)
    for node in sorted(found, key=lambda n: n.lineno, reverse=True):
        body = node.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
            body = body[1:]  # docstring は残す（何を返すかの説明で、答えの行ではない）
        first, last = body[0].lineno, node.end_lineno
        if first == node.lineno:
            raise ValueError(f"{node.name}: 本体が def と同じ行にあります（学習者版で消せません）")
        indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        lines[first - 1:last] = [f"{indent}...  # 学習者版: 値は作るときに記録したもの（ch6/recorded.json）\n"]
    return "".join(lines), sorted(node.name for node in found)


def build_wheel(dest: Path, edition_info: dict, records: dict | None = None) -> Path:
    """学習者版の ch6 の wheel（純 Python、py3-none-any）を dest に書く。records（:mod:`ch6.recorded` の記録）を
    ``ch6/recorded.json`` として入れ、``@recorded`` の付いた関数の本体を消す。"""
    project = _project()
    name, version = project["name"], project["version"]
    dist_info = f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {str(p.relative_to(ROOT).as_posix()): p.read_bytes() for p in package_files()}
    for path, data in files.items():
        if path.endswith(".py") and b"recorded" in data:
            stripped, _ = strip_recorded(data.decode("utf-8"))
            files[path] = stripped.encode("utf-8")
    files["ch6/edition.json"] = (json.dumps(edition_info, ensure_ascii=False, indent=1) + "\n").encode()
    if records is not None:
        files["ch6/recorded.json"] = (json.dumps(records, sort_keys=True, separators=(",", ":")) + "\n").encode()
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {project.get('description', '')}", f"Requires-Python: {project['requires-python']}"]
    metadata += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: tools/learner_edition.py\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    scripts = project.get("scripts", {})
    if scripts:
        files[f"{dist_info}/entry_points.txt"] = ("[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in scripts.items())).encode()
    files[f"{dist_info}/top_level.txt"] = f"{name}\n".encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data in files.items():
        writer.writerow([path, _record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    files[f"{dist_info}/RECORD"] = record.getvalue().encode()
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(files, key=lambda p: (p.startswith(dist_info), p)):  # dist-info は最後（wheel の決まり）
            zf.writestr(_zipinfo(path), files[path])
    return wheel


def learner_lesson(text: str) -> str:
    """本編の .ipynb を学習者版の形に: jupytext の対の指定（保存で .md を作る）と、solutions/ への案内を外す。"""
    nb = json.loads(text)
    nb.get("metadata", {}).pop("jupytext", None)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            new = src
            for pattern in SOLUTION_POINTERS:
                new = pattern.sub("", new)
            if new != src:
                cell["source"] = new.splitlines(keepends=True)
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _readme_table() -> str:
    """README の「ノートブック」の表（Colab の列は外す: 学習者版は手元で開く）。"""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## ノートブック")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            rows.append("|" + "|".join(cells[:-1]) + "|")
    return "\n".join(rows)


def learner_readme() -> str:
    return f"""# JAX 第 6 章ハンズオン（学習者版）

書籍の第 6 章「ベクトル化（vmap）と並列化（pmap / shard_map / sharding）」を、手を動かして学ぶノートブック集の
受講者向けの配布物です。本編（`notebooks/`）と演習（`exercises/`）が入っています。解答例は入っていません。

## はじめ方

Python 3.12 と make のあるマシンで、このフォルダで次を実行します。初回だけ、環境 `.venv` を作ります（数分、1 GB ほど）。

```bash
make lab     # JupyterLab で講座を開く
make smoke   # 動作確認。最後の行が「✅ 準備ができています」になれば準備完了です
```

ネットワークのない教室では、先生が配る wheel のフォルダを、このフォルダの `wheelhouse/` に置いてから `make setup` を
実行します（別の場所なら `make setup WHEELHOUSE=/media/usb/wheelhouse`）。講座のパッケージ `ch6` は `packages/` の
wheel から入るので、ネットワークも setuptools も要りません。

## 演習の進め方

演習ノートブック（`exercises/`）では、関数の中の `# TODO` を書き換え、すぐ下の `ch6.check("6.1-1", 関数)` のセルを
実行します。結果は 1 行で表示されます。

- ✅ 正解 ／ ❌ 不正解（理由とヒント）／ ❌ エラー（解答のコードの中で例外が起きた）／ ⏳ 未解答

チェックは隠し入力で関数を呼び、教えたい作り方（バッチのループがないか、シャーディング、集団通信）も確かめます。
提出の前に、自分のノートブックを `.venv/bin/ch6-grade exercises/6_1_vmap.ipynb` で採点できます。
チェックの中身（参照の答え）は、学習者版ではノートブックから読み込めません。

## ノートブック

{_readme_table()}

## English

The learner edition of the chapter-6 JAX course: lessons (`notebooks/`) and exercises (`exercises/`), without the
solutions. Run `make lab` (it builds `.venv` the first time) and `make smoke` (the last line should read
"✅ 準備ができています"). Offline, put the wheelhouse your teacher hands out into `wheelhouse/` here (or run
`make setup WHEELHOUSE=/path/to/wheelhouse`);
the course package `ch6` installs from the wheel in `packages/` without network or setuptools. In an exercise notebook,
fill in the `# TODO` and run the `ch6.check("6.1-1", fn)` cell: ✅ correct, ❌ wrong (reason and hint), ⏳ not done yet.
`.venv/bin/ch6-grade exercises/6_1_vmap.ipynb` grades your notebook before you hand it in. In this edition the checks'
reference implementations cannot be imported from a notebook.
"""


def _python_lines() -> str:
    """完全版の Makefile の Python の探し方（2 行）をそのまま使う。"""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^PYTHON \?=.*?\n(?:[ \t]+.*\n)*", text, re.M)
    if m is None:
        raise SystemExit("Makefile に PYTHON ?= の行が見つかりません")
    return m.group(0)


def learner_makefile(wheel_name: str) -> str:
    return f"""# 学習者版の講座（解答なし）/ the learner edition of the course (no solutions)
#   make lab    -> .venv を作って（なければ）JupyterLab で講座を開く
#   make setup  -> .venv を作るだけ（requirements.txt と packages/ の講座のパッケージ）
#   make smoke  -> 動作確認（最後の行が「✅ 準備ができています」）
# ネットワークのない教室: 先生が配った wheel のフォルダを、このフォルダの wheelhouse/ に置くか WHEELHOUSE= で指定する
{_python_lines()}VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ch6-installed
WHEEL  := packages/{wheel_name}
WHEELHOUSE ?= $(wildcard wheelhouse)
PIP    := -m pip install --quiet --disable-pip-version-check $(if $(WHEELHOUSE),--no-index --find-links "$(WHEELHOUSE)",)

.PHONY: setup lab smoke

$(STAMP): requirements.txt $(WHEEL)
\t@test -n "$(PYTHON)" || {{ echo "Python 3.12 以上が見つかりません / Python 3.12+ is required: install it (e.g. 'pyenv install 3.12' or 'apt install python3.12') and run make again"; exit 1; }}
\t$(PYTHON) -m venv $(VENV)
\t$(BIN)/python $(PIP) -r requirements.txt
\t$(BIN)/python $(PIP) --no-index --no-deps --force-reinstall $(WHEEL)
\t@touch $@

setup: $(STAMP)

# root で動かすとき（コンテナなど）だけ --allow-root を付ける。.jupyter/ の設定は packages/ をファイルブラウザから隠す
lab: $(STAMP)
\tJUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${{JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}}" \\
\t  $(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

smoke: $(STAMP)
\t$(BIN)/python -m ch6.smoke
"""


def jupyter_config() -> str:
    base = json.loads((ROOT / "tools/jupyter/jupyter_server_config.json").read_text(encoding="utf-8"))
    globs = base["ContentsManager"]["hide_globs"]
    base["ContentsManager"]["hide_globs"] = globs + [g for g in ("packages", "wheelhouse") if g not in globs]
    return json.dumps(base, indent=2) + "\n"


GITIGNORE = ".venv/\n__pycache__/\n.ipynb_checkpoints/\n"


def build(out: Path, name: str = "ch6-learner", formats: tuple[str, ...] = ("zip", "gztar"),
          git: bool = False, record: bool = True) -> Edition:
    """out/name/ に学習者版のフォルダを作り、formats のアーカイブ（out/name.zip、out/name.tar.gz）を書く。

    record=False はテストのためだけ: 記録（チェックを 1..8 デバイスのプロセスで動かす）を省き、wheel に
    ``ch6/recorded.json`` を入れない（記録に置き換えたチェックは、その wheel では採点できない）。"""
    folder = out / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    project = _project()
    info = {"edition": "learner", "version": project["version"], "commit": _commit(),
            "repository": project["urls"]["Repository"]}
    wheel = build_wheel(folder / "packages", info, recorded_expectations.expectations() if record else None)
    for sub in ("notebooks", "exercises"):
        (folder / sub).mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        (folder / "notebooks" / nb.name).write_text(learner_lesson(nb.read_text(encoding="utf-8")), encoding="utf-8")
    for nb in sorted((ROOT / "exercises").glob("*.ipynb")):
        shutil.copyfile(nb, folder / "exercises" / nb.name)  # そのまま（採点はセルの中身で提出物を見分ける）
    for rel in COPIED:
        shutil.copyfile(ROOT / rel, folder / rel)
    (folder / "README.md").write_text(learner_readme(), encoding="utf-8")
    (folder / "Makefile").write_text(learner_makefile(wheel.name), encoding="utf-8")
    (folder / ".jupyter").mkdir()
    (folder / ".jupyter/jupyter_server_config.json").write_text(jupyter_config(), encoding="utf-8")
    (folder / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    archives = [_archive(folder, out, fmt) for fmt in formats]
    if git:
        _git_repo(folder, info)
    return Edition(folder, wheel, archives)


def _files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts)


def _archive(folder: Path, out: Path, fmt: str) -> Path:
    """同じ中身なら同じバイト列のアーカイブ（時刻と所有者を固定）。中の最上位はフォルダ名。"""
    if fmt == "zip":
        path = out / f"{folder.name}.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for p in _files_of(folder):
                zf.writestr(_zipinfo(f"{folder.name}/{p.relative_to(folder).as_posix()}"), p.read_bytes())
        return path
    if fmt == "gztar":
        path = out / f"{folder.name}.tar.gz"
        with open(path, "wb") as raw:
            import gzip

            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
                for p in _files_of(folder):
                    ti = tarfile.TarInfo(f"{folder.name}/{p.relative_to(folder).as_posix()}")
                    data = p.read_bytes()
                    ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
                    tar.addfile(ti, io.BytesIO(data))
        return path
    raise ValueError(f"unknown archive format {fmt!r} (zip, gztar)")


def _git_repo(folder: Path, info: dict) -> None:
    """履歴のないリポジトリ（ブランチ main、1 コミット）。完全版の履歴とブランチは入らない。"""
    def git(*args):
        subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("-c", "user.name=ch6 learner edition", "-c", "user.email=learner-edition@localhost", "commit", "-q",
        "-m", f"学習者版 / learner edition (ch6 {info['version']}, {info['commit']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="学習者版（解答なし）を作る / build the learner edition (no solutions)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "learner", help="書き出すフォルダ（既定 build/learner）")
    ap.add_argument("--name", default="ch6-learner", help="学習者版のフォルダとアーカイブの名前")
    ap.add_argument("--git", action="store_true", help="フォルダを履歴のない git リポジトリ（main、1 コミット）にする")
    args = ap.parse_args(argv)
    ed = build(args.out.resolve(), args.name, git=args.git)
    notebooks = len(list((ed.folder / "notebooks").glob("*.ipynb")))
    exercises = len(list((ed.folder / "exercises").glob("*.ipynb")))
    print(f"学習者版: {ed.folder}（本編 {notebooks} 冊、演習 {exercises} 冊、{ed.wheel.name}）")
    for a in ed.archives:
        print(f"  {a}  {a.stat().st_size / 1e6:.1f} MB")
    if args.git:
        print(f"  git: {ed.folder}（ブランチ main、1 コミット。教室用のリポジトリへ: git -C {ed.folder} push URL main）")
    print("入れていないもの: " + "、".join(LEFT_OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
