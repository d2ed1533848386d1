# 2 つのコマンドで十分です / Two commands do all the set-up:
#   make lab    -> .venv を作って（なければ）JupyterLab で講座を開く
#   make test   -> .venv を作って（なければ）すべてのテストを実行する
# Python 3.12 以上を探す（3.12 が試験済み。pyenv なら .python-version が 3.12 を選ぶ）
PYTHON ?= $(shell for p in python3.12 python3.13 python3.14 python3; do \
             $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; done)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ch6-installed
JOBS   ?= 2

.PHONY: lab test test-devices exercises outputs bench lint clean

$(STAMP): requirements.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 以上が見つかりません / Python 3.12+ is required: install it (e.g. 'pyenv install 3.12' or 'apt install python3.12') and run make again"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

# root で動かすとき（コンテナなど）だけ --allow-root を付ける
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

# 単体テスト + 一貫性テスト（演習と解答の同期など）+ 全ノートブックを nbval（厳密）で、8 模擬デバイスで
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval

# 模擬デバイス 1, 2, 4 個でも全ノートブックが動くこと（出力は比べない）
test-devices: $(STAMP)
	for n in 1 2 4; do \
	  $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval-lax --devices $$n notebooks solutions exercises || exit 1; \
	done

# solutions/ から exercises/ を作り直して実行
exercises: $(STAMP)
	$(BIN)/python tools/make_exercises.py

# notebooks/ と solutions/ を実行し直して出力を保存し、exercises/ も作り直す
outputs: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --write notebooks solutions
	$(BIN)/python tools/make_exercises.py

# 1 冊ごとの実行時間と合計
bench: $(STAMP)
	$(BIN)/python tools/run_notebooks.py

lint:
	python3 ../shared/tools/course_lint.py

clean:
	rm -rf $(VENV)
