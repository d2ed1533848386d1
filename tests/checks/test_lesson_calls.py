"""ch6.checks.lesson_calls: 学習者の呼び出しの間に本編の関数が呼ばれたかを、呼び方（モジュールの属性、名前で読み込んだ
関数、採点が読み込み直す前のモジュール）によらず見て、終わったら元に戻す。"""
import importlib.util
import types

from ch6 import serving
from ch6.checks.lesson_calls import lesson_calls

SIZE = (1, 1, 1, 1, 1, 1)


def _learner(source: str, **names):
    """ノートブックのセルのように、自分のグローバル変数を持つ学習者の関数 f。"""
    space = dict(names)
    exec(source, space)
    return space["f"], space


def test_a_call_through_the_module_or_an_imported_name_is_seen_and_undone():
    real = serving.kv_cache_bytes
    f, _ = _learner("def f():\n    return serving.kv_cache_bytes(*SIZE)", serving=serving, SIZE=SIZE)
    with lesson_calls(f, "ch6.serving", "kv_cache_bytes") as called:
        assert f() == 2
    assert called == ["kv_cache_bytes"] and serving.kv_cache_bytes is real

    g, space = _learner("def f():\n    return kv_cache_bytes(*SIZE)", kv_cache_bytes=real, SIZE=SIZE)
    with lesson_calls(g, "ch6.serving", "kv_cache_bytes") as called:
        g()
    assert called == ["kv_cache_bytes"] and space["kv_cache_bytes"] is real


def test_other_functions_and_calls_outside_are_not_counted():
    f, _ = _learner("def f():\n    return serving.tree_bytes([])", serving=serving)
    with lesson_calls(f, "ch6.serving", "kv_cache_bytes") as called:
        f()
    serving.kv_cache_bytes(*SIZE)
    assert called == []


def test_the_module_the_learners_cells_imported_before_grading_reloaded_ch6():
    """ch6-grade は学習者のセルの後で ch6 を読み込み直す: 学習者の serving と ch6.serving は別のモジュールになる。"""
    spec = importlib.util.spec_from_file_location("ch6.serving", serving.__file__)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    assert old is not serving
    old_real = old.kv_cache_bytes
    package = types.ModuleType("ch6")
    package.serving = old
    for name, value in (("serving", old), ("ch6", package)):
        source = "def f():\n    return " + ("serving" if name == "serving" else "ch6.serving") + ".kv_cache_bytes(*SIZE)"
        f, _ = _learner(source, SIZE=SIZE, **{name: value})
        with lesson_calls(f, "ch6.serving", "kv_cache_bytes") as called:
            f()
        assert called == ["kv_cache_bytes"], name
        assert old.kv_cache_bytes is old_real
