"""すべてのノートブックテストに共通の設定。

- カーネルの環境: JAX_PLATFORMS=cpu、JAX_NUM_CPU_DEVICES は --devices（既定 8、
  環境変数 JAX_NUM_CPU_DEVICES があればそれ）。カーネルはこの環境を引き継ぎます。
- nbval は stderr（警告など、版や機械で変わるもの）を比べません。
"""
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--devices", default=None,
                     help="number of simulated CPU devices for kernels and tests (default 8)")


# make quick が飛ばす遅いテスト: カーネルやプロセスを起動する、全変異体や全チェックを実行する、モデルを学習する。
# モジュールごと（SLOW_MODULES）と、速いモジュールの中の 1 つのテストごと（SLOW_TESTS、"モジュール::テスト"）
SLOW_MODULES = ("test_grade", "test_guard", "test_isolation_attacks", "test_multihost", "test_mutate", "test_hostile", "test_capstone", "test_lm",
                "test_env", "test_smoke", "test_learner_answers")
SLOW_TESTS = ("test_core::test_every_check_reports_not_done_for_a_stub",
              "test_show::test_sharding_text_in_a_kernel_is_one_plain_stream",
              "test_nbrun::test_execute_runs_top_to_bottom",
              "test_nbgrader_edition::test_grade_uses_the_installed_checks_and_flags_a_replaced_run_check",
              "test_nbgrader_edition::test_grade_shows_a_correct_answers_warnings_on_stdout_not_stderr",
              "test_learner_edition::test_learner_kernel_refuses_the_checks_and_still_grades",
              "test_own_checkout::test_pytest_refuses_to_start_when_kernels_would_import_another_checkout",
              "test_accelerator::test_the_checks_own_tests_run_in_a_child_and_are_counted",
              "test_gradebook::test_command_writes_the_gradebook_from_real_submissions")
# 通しのテスト（クラスの採点、採点の監視、2 プロセスの学習、チェックへの意地悪な値、仕上げの保存と再開、学習者版の
# カーネル）と、演習ノートブック（exercises/、空欄のまま）の nbval: make test ではなく CI の段 make test-integration で
# （make test を 2 コアで 5 分に収めるため）
# test_learner_answers: 学習者版を作るときに、記録のために 8 プロセスでチェックを動かす（新しいクローンで 25 秒ほど）
# test_lm（モデルを学習する）、test_env と test_smoke（setup() を子プロセスで何通りも起動する）、全チェックに空欄を
# 渡すテスト、本物の提出での成績簿、変異の実行時の関数: 2 コアで合わせて約 60 秒。make test を 5 分に収めるため
# ここへ（2026-12-07、新しいクローンの make test の --durations で最も遅かったもの）
INTEGRATION_MODULES = ("test_grade", "test_guard", "test_isolation_attacks", "test_multihost", "test_hostile", "test_capstone",
                       "test_learner_answers", "test_lm", "test_env", "test_smoke")
INTEGRATION_TESTS = ("test_learner_edition::test_learner_kernel_refuses_the_checks_and_still_grades",
                     "test_accelerator::test_the_checks_own_tests_run_in_a_child_and_are_counted",
                     "test_core::test_every_check_reports_not_done_for_a_stub",
                     "test_gradebook::test_command_writes_the_gradebook_from_real_submissions",
                     "test_mutate::test_runtime_functions_give_the_values_of_the_collectives_they_replace")
# 全解答の全変異体にチェックを実行するスコアと、8 デバイスで見抜いた変異体を 3 と 1 デバイスで試し直すテスト:
# make test ではなく CI の段 make test-mutation で。1 冊の変異体は make exercise NB=… が実行します
MUTATION_TESTS = ("test_mutate::test_mutation_score",
                  "test_mutate::test_mutants_killed_at_8_devices_are_killed_at_3_and_1")


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = f"{item.path.stem}::{getattr(item, 'originalname', item.name)}"
        if item.path.stem in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if name in MUTATION_TESTS:
            item.add_marker(pytest.mark.mutation)
        top = item.path.relative_to(config.rootpath).parts[:1] if item.path.is_relative_to(config.rootpath) else ()
        if item.path.stem in INTEGRATION_MODULES or name in INTEGRATION_TESTS or top == ("exercises",):
            item.add_marker(pytest.mark.integration)
        # tests/checks/s6_N/: 節ごとのチェックの単体テスト（JAX のコンパイルが多い）。make quick は SECTION= の節だけ
        parts = item.path.relative_to(config.rootpath).parts if item.path.is_relative_to(config.rootpath) else ()
        if parts[:2] == ("tests", "checks") and len(parts) > 3 and parts[2].startswith("s6_"):
            item.add_marker(pytest.mark.section)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts kernels or processes, or runs every mutant (make quick skips it)")
    config.addinivalue_line("markers", "integration: end-to-end tests that start kernels or processes (make test-integration)")
    config.addinivalue_line("markers", "section: a check section's unit tests (make quick runs only SECTION=s6_N)")
    config.addinivalue_line("markers", "mutation: the mutation score of every check (make test-mutation, not make test)")
    devices = config.getoption("--devices") or os.environ.get("JAX_NUM_CPU_DEVICES") or "8"
    os.environ["JAX_NUM_CPU_DEVICES"] = str(devices)
    # CH6_TESTS_ON=accelerator: the accelerator leg runs the checks' own tests on the chip (tools/accelerator.py
    # --checks), at its device count; everywhere else the tests run on the simulated CPU devices
    if os.environ.get("CH6_TESTS_ON") != "accelerator":
        os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("PYTHONHASHSEED", "0")
    _own_checkout(config)
    # 採点は提出物を隔離して実行します（ch6.grading.isolate）。名前空間を使えないマシン（そういうコンテナの CI など）では、
    # 採点のテストは隔離なし（1 冊ごとの確かめつき）で動かします。拒否と両方の方法は tests/grading/test_isolate*.py が試します
    from ch6.grading import isolate

    if isolate.mode() is None:
        os.environ[isolate.ENV_UNISOLATED] = "1"
    _ignore_stderr()


def _own_checkout(config):
    """テストも、テストが起動するカーネル・プロセスも、このチェックアウトの ch6 を読み込むこと（共有の環境で編集可能な
    インストールが別のチェックアウトを指していると、黙ってそちらを試してしまう）。xdist の親で 1 回だけ。"""
    if hasattr(config, "workerinput"):
        return
    from pathlib import Path

    import ch6
    from ch6 import nbrun

    own = Path(config.rootpath).resolve() / "ch6"
    if Path(ch6.__file__).resolve().parent != own:
        raise pytest.UsageError(f"conftest.py: the tests import ch6 from {Path(ch6.__file__).resolve().parent}, "
                                f"not from this checkout's {own}")
    try:
        nbrun.check_own_ch6(config.rootpath)
    except nbrun.OtherCheckout as err:
        raise pytest.UsageError(f"conftest.py: {err}") from None


def _ignore_stderr():
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval なしでも単体テストは動く
        return
    if getattr(IPyNbCell.compare_outputs, "_ch6", False):
        return
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        keep = [o for o in test if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
        keep_ref = [o for o in ref if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
        return original(self, keep, keep_ref, skip_compare)

    compare_outputs._ch6 = True
    IPyNbCell.compare_outputs = compare_outputs


@pytest.fixture(scope="session")
def n_devices():
    import jax

    return jax.device_count()


SUMMARIES = {"mutation_report": "mutation testing of the checks (tools/mutate.py)",
             "mutation_devices_report": "mutants killed at 8 devices, tried at 3 and 1 (tools/mutate.py)"}


def pytest_terminal_summary(terminalreporter):
    """ミューテーションテストのスコア（tests/tools/test_mutate.py）を最後に表示する。"""
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for name, value in getattr(rep, "user_properties", []) or []:
                if name in SUMMARIES and getattr(rep, "when", "call") == "call":
                    terminalreporter.write_sep("-", SUMMARIES[name])
                    terminalreporter.write_line(value)
