#!/usr/bin/env bash
# 古い JAX が入ったままの Colab を模す: 新しい venv に MIN_JAX より古い JAX を PyPI から入れ、講座のパッケージを
# wheel から入れる（Colab で最初のセルがするのと同じく、パッケージは入っている JAX に触れない）。そのうえで
#   - Colab の印（COLAB_RELEASE_TAG）なし: 何も入れず、合うコマンドを表示するだけであること
#   - Colab の印あり: 最初のセルが JAX を入れ直し、講義と演習のノートブックがすべて最後まで動くこと（タグは見ない）
#   bash .ci/stale_colab.sh [python]      STALE_JAX=0.8.1 STALE_DEVICES=2 で変えられる
set -euo pipefail
PY=${1:-python3.12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STALE_JAX=${STALE_JAX:-0.8.1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
start=$SECONDS
PIP=(--quiet --disable-pip-version-check)

echo "stale: build the wheel"
"$ROOT/.venv/bin/python" -m pip wheel "${PIP[@]}" --no-deps "$ROOT" -w "$WORK/dist"
rm -rf "$ROOT/build"
# jax と jaxlib 以外は requirements.txt の版（Colab にあらかじめ入っているものの代わり）
grep -vE '^(jax|jaxlib)==' "$ROOT/requirements.txt" > "$WORK/constraints.txt"
echo "stale: a fresh venv with jax==$STALE_JAX preinstalled"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install "${PIP[@]}" "jax==$STALE_JAX" "jaxlib==$STALE_JAX" numpy chex optax \
  -c "$WORK/constraints.txt"
echo "stale: the package from the wheel (it must keep the preinstalled JAX)"
"$WORK/venv/bin/python" -m pip install "${PIP[@]}" "$WORK"/dist/ch6-*.whl -c "$WORK/constraints.txt"
cd "$WORK"
"$WORK/venv/bin/python" -I "$ROOT/.ci/stale_colab.py" "$ROOT" "$STALE_JAX"
echo "stale: done in $((SECONDS - start)) s; CPU seconds (this shell, then its children: user system):"
times
