# 2 つのコマンドで十分です / Two commands do all the set-up:
#   make lab    -> .venv を作って（なければ）JupyterLab で講座を開く
#   make test   -> .venv を作って（なければ）すべてのテストを実行する
#   make setup  -> .venv を作るだけ（採点する人・教室の事前準備。テストもノートブックも実行しない）
# Python 3.12 以上を探す（3.12 が試験済み。pyenv なら .python-version が 3.12 を選ぶ）
PYTHON ?= $(shell for p in python3.12 python3.13 python3.14 python3; do \
             $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; done)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ch6-installed
JOBS   ?= 2
PIP    := -m pip install --quiet --disable-pip-version-check
# 最初の make lab / make test で進み具合が見えるように: パッケージごとに 1 行（Collecting … / Downloading …）
PIP_SHOWN := -m pip install --disable-pip-version-check --progress-bar off
# 動作を確かめている最も古い JAX（ch6/env.py の MIN_JAX だけが正本）
MIN_JAX := $(shell sed -n 's/^MIN_JAX = "\([^"]*\)".*/\1/p' ch6/env.py)
MIN_VENV := .venv-min
# nbgrader 版の試験だけに使う venv（nbgrader は講座の環境に入れない。版は requirements-nbgrader.txt）
NBGRADER_VENV := .venv-nbgrader
# CI で試すデバイス数（奇数を含む）。本編はすべての数で。解答は 1 と 3 で（2 と 4 の採点は、チェックの単体テストが
# 参照の答えと誤答で確かめる）。演習（空欄のまま）は 3 で（空欄のチェックが ⏳ になることは、全チェックについて
# test_core の stub のテストが各数で確かめる）。CI を 90 分に収めるため（2 コアで、各数の 3 冊ずつが 4〜8 分）
DEVICE_COUNTS ?= 1 2 3 4
SOLUTION_DEVICE_COUNTS ?= 1 3
EXERCISE_DEVICE_COUNTS ?= 3
# チェックの単体テスト（tests/checks/s6_N/）は make test に入れず、ここで 1, 3, 4, 8 で（make test を 2 コアで 5 分に収めるため）。
# 2 は make exercise が変えた節について 1, 2, 3, 8 で試すので、CI は 4（偶数の 2 次元メッシュ）を足す
CHECK_DEVICE_COUNTS ?= 1 3 4 8

.PHONY: setup lab author-lab depends test test-integration test-accelerator chip-traces test-mutation test-devices test-isa test-min test-wheel test-stale test-nbgrader nbgrader nbgrader-setup ci exercises outputs bench clean quick lint sync notebook exercise

$(STAMP): requirements.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 以上が見つかりません / Python 3.12+ is required: install it (e.g. 'pyenv install 3.12' or 'apt install python3.12') and run make again"; exit 1; }
	@echo "[1/3] $(VENV) を作ります / creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "[2/3] requirements.txt のパッケージを入れます（初回は数分かかります。1 行が 1 パッケージ）/ installing the pinned packages (a few minutes the first time, one line per package)"
	$(BIN)/python $(PIP_SHOWN) -r requirements.txt
	@echo "[3/3] 講座のパッケージ ch6 を入れます / installing the course package ch6"
	$(BIN)/python $(PIP) --no-deps -e .
	@touch $@

# 環境（.venv）を作るだけ。ほかには何もしない（作ってあれば何もしない）
setup: $(STAMP)

# 学習者の作業用のコピー work/（git は無視する: tools/workcopy.py）を作り、そこを開く。自動保存や答えは work/ の
# コピーだけを変えるので、講座の更新（git pull）と衝突しない。ないノートブックだけをコピーし、あるものは上書きしない。
# root で動かすとき（コンテナなど）だけ --allow-root を付ける
lab: $(STAMP)
	$(BIN)/python tools/workcopy.py
	JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)/work" $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

# 著者用: チェックアウトそのものを開く（.ipynb を保存すると jupytext が MyST の双子 X.md を書く）。tools/jupyter/ の
# 設定で、ファイルブラウザにはレッスンごとに .ipynb 1 つだけを見せる（双子 X.md と X.outputs.txt は隠すだけ）
author-lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

# lint（ruff）+ 単体テスト + 一貫性テスト（演習と解答の同期など）+ 本編と解答を nbval（厳密）で、8 模擬デバイスで。
# 全チェックのミューテーションのスコア（make test-mutation）と、節ごとのチェックの単体テスト（tests/checks/s6_N/、
# make test-devices が 1, 3, 4, 8 デバイスで）は別の段: make test を 2 コアで 5 分以内に保つため
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval -m "not mutation and not section and not integration"

# 通しのテスト（conftest.py の INTEGRATION_MODULES / INTEGRATION_TESTS: クラスの採点と監視、2 プロセス、意地悪な値、
# 保存と再開、学習者版のカーネル）と、演習ノートブック（空欄のまま）の厳密な nbval
test-integration: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval -m integration

# 全解答の全変異体でチェックを試し、スコア（95% 以上）と生き残りを表示する（tests/tools/test_mutate.py、8 模擬デバイス）。
# 8 で見抜いた変異体は 3 と 1 模擬デバイスでも試す（数ごとに 1 プロセス、2 つを並べて）
test-mutation: $(STAMP)
	$(BIN)/python -m pytest -q -p no:xdist -m mutation tests/tools/test_mutate.py

# 内側のループ: lint と、ノートブックもカーネルも起動しない速い単体テスト（測った値: 静かな 2 コアで 33 秒、CPU 54 秒。
# カーネルやプロセスを起動する・モデルを学習する・全チェックを実行するテストは conftest.py の SLOW_MODULES / SLOW_TESTS で make test へ）
# SECTION=s6_7 を付けると、その節のチェックの単体テストも（節のテストは全部なら make test、1 節なら make exercise も）
quick: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/python -m pytest -q -n $(JOBS) -m "not slow and not section" tests
	$(if $(SECTION),$(BIN)/python -m pytest -q -n $(JOBS) tests/checks/$(SECTION),)

# ruff（pyproject.toml の設定）: パッケージ、ツール、テスト、ノートブックのコード
lint: $(STAMP)
	$(BIN)/ruff check .

# .md（MyST）と .ipynb を揃え、ソースが変わったノートブックを実行し直す（tools/twins.py）
sync: $(STAMP)
	$(BIN)/python tools/twins.py

# 1 冊の手順（tools/recipe.py）: make notebook NB=6_2_pmap（双子を揃え、前に実行したときから変わったノートブックだけ
# 実行し直し、演習と採点データを作り直す）、make exercise NB=6_2_pmap（それに ruff・用語・その節のミューテーション・
# その節のチェックのテスト 1/2/3/8 デバイス・意地悪な値・速い採点と一貫性のテスト）。ALL=1 で変わっていなくても実行し直す
notebook exercise: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make $@ NB=6_2_pmap"; exit 2; }
	$(BIN)/python tools/recipe.py $@ $(NB) $(if $(ALL),--all,)

# ch6 のモジュールに依存するノートブック: make depends MOD=ch6/lm.py（表示）、RUN=1 で実行し直す（tools/recipe.py depends）
depends: $(STAMP)
	@test -n "$(MOD)" || { echo "usage: make depends MOD=ch6/lm.py [RUN=1]"; exit 2; }
	$(BIN)/python tools/recipe.py depends $(MOD) $(if $(RUN),--run,)

# GPU・TPU のあるマシンで手で実行する（CI にはない）: JAX_PLATFORMS を外し、全レッスンと全解答をプロセス内（カーネルなし）で
# 実行して、予期しないエラーとチェックの結果を表示する（tools/accelerator.py）。RECORD=1 で docs/accelerator.md に記録。
# ACCEL_PYTHON=python3 ならマシンの JAX で（先に source tools/accelerator_prep.sh）。NOTEBOOKS=... で一部だけ。
# CHECKS=1 でチェックの単体テスト（tests/checks）もチップで、CHECKS=only ならそれだけ（pytest が要る）
ACCEL_PYTHON ?=
test-accelerator: $(if $(ACCEL_PYTHON),,$(STAMP))
	env -u JAX_PLATFORMS $(or $(ACCEL_PYTHON),$(BIN)/python) tools/accelerator.py \
	  $(if $(RECORD),--record docs/accelerator.md,) $(if $(filter only,$(CHECKS)),--checks-only,$(if $(CHECKS),--checks,)) \
	  $(NOTEBOOKS)

# チップのトレースを記録し直す（6.11a が読む ch6/data/traces/）: チップのあるマシンで生のトレースと測った値を
# build/chip に書き、小さく切り詰めて ch6/data/traces/ に入れる（切り詰めはどのマシンでも: make chip-traces TRIM_ONLY=1）
chip-traces: $(if $(ACCEL_PYTHON),,$(STAMP))
	$(if $(TRIM_ONLY),,env -u JAX_PLATFORMS $(or $(ACCEL_PYTHON),$(BIN)/python) tools/chip_traces.py --out build/chip)
	$(or $(ACCEL_PYTHON),$(BIN)/python) tools/chip_traces.py --trim build/chip

# 奇数を含むデバイス数で: 全ノートブックが最後まで動くこと（出力は比べない）と、チェックの単体テスト
test-devices: $(STAMP)
	for n in $(DEVICE_COUNTS); do \
	  dirs=notebooks; \
	  case " $(SOLUTION_DEVICE_COUNTS) " in *" $$n "*) dirs="$$dirs solutions";; esac; \
	  case " $(EXERCISE_DEVICE_COUNTS) " in *" $$n "*) dirs="$$dirs exercises";; esac; \
	  echo "$$n devices: $$dirs"; \
	  $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval-lax --devices $$n $$dirs || exit 1; \
	done
	for n in $(CHECK_DEVICE_COUNTS); do \
	  $(BIN)/python -m pytest -q -n $(JOBS) --devices $$n tests/checks \
	    tests/test_core.py::test_every_check_reports_not_done_for_a_stub || exit 1; \
	done

# 古い命令セットの CPU でも保存した出力と一致すること（厳密）
test-isa: $(STAMP)
	XLA_FLAGS=--xla_cpu_max_isa=SSE4_2 $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --nbval notebooks solutions exercises

# 最も古い対応 JAX（MIN_JAX）で: 単体テストと全ノートブック（出力は比べない）
$(MIN_VENV)/.ch6-installed: requirements.txt pyproject.toml ch6/env.py
	@test -n "$(PYTHON)" || { echo "Python 3.12+ is required"; exit 1; }
	rm -rf $(MIN_VENV) && $(PYTHON) -m venv $(MIN_VENV)
	sed -e 's/^jax==.*/jax==$(MIN_JAX)/' -e 's/^jaxlib==.*/jaxlib==$(MIN_JAX)/' requirements.txt > $(MIN_VENV)/requirements-min.txt
	$(MIN_VENV)/bin/python $(PIP) -r $(MIN_VENV)/requirements-min.txt
	$(MIN_VENV)/bin/python $(PIP) --no-deps -e .
	@touch $@

# JAX の版によらないテスト（ツール、サイト、採点の仕組み、文章の規則、純 Python のコストの式）は除く（make test が試す）。
# 演習（空欄のまま）も除き、空欄のチェックが ⏳ になることは test_core の stub のテストで確かめる
MIN_IGNORE := tests/tools tests/site tests/grading tests/test_grade.py tests/test_glossary.py tests/test_glossary_wording.py \
  tests/test_references.py tests/test_workshop_guide.py tests/test_consistency.py tests/test_public_api.py tests/test_cost.py \
  tests/test_strategies.py tests/test_hardware.py exercises
test-min: $(MIN_VENV)/.ch6-installed
	$(MIN_VENV)/bin/python -c 'import jax; assert jax.__version__ == "$(MIN_JAX)", jax.__version__; print("JAX", jax.__version__)'
	$(MIN_VENV)/bin/python -m pytest -q -n $(JOBS) --dist loadfile --nbval-lax -m "not mutation" \
	  $(addprefix --ignore=,$(MIN_IGNORE))

# wheel だけを入れた環境（リポジトリなし、Colab と同じ）で: 演習ノートブック、採点、6.6 の 2 プロセス、6.9 と 6.10 の本編
test-wheel: $(STAMP)
	bash .ci/wheel_smoke.sh $(PYTHON)

# 古い JAX（MIN_JAX より前）が入ったままの Colab を模して（wheel から）: Colab の印なしでは何も入れずにコマンドを表示し、
# 印ありでは最初のセルが JAX を入れ直して、講義と演習のノートブックがすべて最後まで動く（タグは見ない、2 デバイス）
test-stale: $(STAMP)
	JOBS=$(JOBS) bash .ci/stale_colab.sh $(PYTHON)

# 本物の nbgrader で: nbgrader 版を generate_assignment → autograde → export し、点数を確かめる（2 デバイス）
$(NBGRADER_VENV)/.ch6-installed: requirements.txt requirements-nbgrader.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12+ is required"; exit 1; }
	rm -rf $(NBGRADER_VENV) && $(PYTHON) -m venv $(NBGRADER_VENV)
	$(NBGRADER_VENV)/bin/python $(PIP) -r requirements-nbgrader.txt
	$(NBGRADER_VENV)/bin/python $(PIP) --no-deps -e .
	@touch $@

# nbgrader の環境（.venv-nbgrader: nbgrader と講座のパッケージ）を作るだけ（先生が nbgrader で採点するとき）
nbgrader-setup: $(NBGRADER_VENV)/.ch6-installed

# クラスの採点（test_nbgrader_class.py）は CLASS_SIZE 人（既定 6: 混んだ 2 コアで 6 人 253 秒。CLASS_SIZE=30 で 30 人 517 秒）
CLASS_SIZE ?= 6
test-nbgrader: $(NBGRADER_VENV)/.ch6-installed
	CH6_NBGRADER=1 CH6_CLASS_SIZE=$(CLASS_SIZE) $(NBGRADER_VENV)/bin/python -m pytest -q -p no:xdist \
		tests/grading/test_nbgrader_roundtrip.py tests/grading/test_nbgrader_attacks.py tests/grading/test_nbgrader_class.py

# nbgrader 版を書く: make nbgrader OUT=コース/ [NBGRADER_ARGS="--assignment ps1 solutions/6_1_vmap.ipynb"]
nbgrader: $(STAMP)
	@test -n "$(OUT)" || { echo "OUT=コースのフォルダ を指定してください / set OUT=course-folder"; exit 1; }
	$(BIN)/python -m ch6.grading.nbgrader $(OUT) $(NBGRADER_ARGS)

# ウェブサイト: ノートブックに保存された出力から _site/ を作る（何も実行しない。オフライン、警告はエラー、1 分以内）
site: $(STAMP)
	$(BIN)/python site/build_site.py

# サイトを本物のブラウザ（ヘッドレス Chromium、Debian の chromium）で: 全ページのエラー・画像・リンク、検索、
# レッスンごとのスクリーンショット（build/site-screenshots/）。Chromium がなければ理由を示して飛ばす（CI では失敗）
test-site: $(STAMP)
	CH6_SITE=1 $(BIN)/python -m pytest -q -p no:xdist -rs tests/site

.PHONY: site test-site

# CI が行うこと（.ci/run と同じ 10 段）: make test、通しのテスト（test-integration）、全チェックのミューテーション（test-mutation）、デバイス数（test-devices）、
# 命令セット（test-isa）、最も古い JAX（test-min）、wheel だけ（test-wheel）、古い JAX の Colab（test-stale）、
# 本物の nbgrader（test-nbgrader）、ブラウザでのサイト（test-site）
ci: test test-integration test-mutation test-devices test-isa test-min test-wheel test-stale test-nbgrader test-site

# 学習者版（解答なし）を作る: build/learner/ch6-learner/ とその .zip・.tar.gz（tools/learner_edition.py）。
# OUT=フォルダで書き出し先、GIT=1 で学習者版のフォルダを履歴のない git リポジトリ（main、1 コミット）にする。
# 参照の実装の代わりに入れる値を、完全版のチェックを 1..8 デバイスで動かして記録するので、.venv（JAX）を使う
# （tools/recorded_expectations.py。結果は build/recorded/ にとっておく）
learner-edition: $(STAMP)
	$(BIN)/python tools/learner_edition.py $(if $(OUT),--out $(OUT),) $(if $(GIT),--git,)

.PHONY: learner-edition

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

clean:
	rm -rf $(VENV) $(MIN_VENV) $(NBGRADER_VENV)
