#!/usr/bin/env bash
# wheel だけを入れた環境（リポジトリのチェックアウトなし）で講座のパッケージが動くことを確かめる。
# Colab・Kaggle と同じ条件: パッケージとその依存だけを入れ、作業フォルダにはリポジトリのファイルがない。
#   bash .ci/wheel_smoke.sh [python]
set -euo pipefail
PY=${1:-python3.12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
start=$SECONDS

echo "wheel: build"
"$ROOT/.venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps "$ROOT" -w "$WORK/dist"
rm -rf "$ROOT/build"
echo "wheel: install into a fresh venv (the package's own dependencies, at the pinned versions)"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$WORK"/dist/ch6-*.whl -c "$ROOT/requirements.txt"
echo "wheel: run from a folder with no checkout"
cd "$WORK"
"$WORK/venv/bin/python" -I "$ROOT/.ci/wheel_smoke.py" "$ROOT"
echo "wheel: done in $((SECONDS - start)) s"
