"""提出物の隔離（ch6.grading.isolate）: 隔離できないときの拒否、写しと比べて元に戻すこと、bubblewrap の引数と実際の効き目。

カーネルは起動しません（クラスを採点する攻撃のテストは tests/grading/test_isolation_attacks.py）。
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ch6.grading import cli, isolate

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "6_1_vmap.ipynb"
needs_bwrap = pytest.mark.skipif(not isolate.bubblewrap_works(), reason="このマシンでは bubblewrap を使えません")


def test_a_class_is_refused_without_isolation_unless_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(isolate.ENV_UNISOLATED, raising=False)
    monkeypatch.setattr(isolate, "bubblewrap_works", lambda: False)
    for name in ("a", "b"):
        (tmp_path / f"{name}_6_1_vmap.ipynb").write_bytes(EXERCISE.read_bytes())
    assert isolate.mode() is None
    assert cli.main([str(tmp_path), "--quiet"]) == 2  # カーネルを起動する前に
    err = capsys.readouterr().err
    assert "隔離して実行できません" in err and "--unisolated" in err and "apt install bubblewrap" in err
    monkeypatch.setenv(isolate.ENV_UNISOLATED, "1")
    assert isolate.mode() == isolate.UNISOLATED
    assert "--unisolated" in isolate.describe(isolate.UNISOLATED)
    assert "bubblewrap" in isolate.describe(isolate.BUBBLEWRAP)


def test_watch_restores_changed_deleted_and_added_files(tmp_path):
    other, scratch = tmp_path / "提出", tmp_path / "提出" / "me"
    (other / "aoki").mkdir(parents=True)
    scratch.mkdir()
    (other / "aoki" / "aoki.ipynb").write_text("aoki")
    (other / "gradebook.db").write_bytes(b"\x00grades")
    (other / "__pycache__").mkdir()
    (other / "__pycache__" / "m.pyc").write_bytes(b"pyc")
    watch = isolate.Watch([other], skip=[scratch])
    assert watch.verify() == []
    import shutil
    shutil.rmtree(other / "aoki")
    (other / "gradebook.db").write_bytes(b"\x00zero")
    (other / "new.py").write_text("x")
    (scratch / "mine.txt").write_text("ok")            # 自分の作業フォルダは書いてよい
    (other / "__pycache__" / "m.pyc").write_bytes(b"forged")  # 元に戻すが、書き換えには数えない
    changed = watch.verify()
    assert sorted(Path(c).name for c in changed) == ["aoki.ipynb", "gradebook.db", "new.py"]
    assert (other / "aoki" / "aoki.ipynb").read_text() == "aoki"
    assert (other / "gradebook.db").read_bytes() == b"\x00grades"
    assert not (other / "new.py").exists() and (scratch / "mine.txt").exists()
    assert (other / "__pycache__" / "m.pyc").read_bytes() == b"pyc"
    note = isolate.outside_note(changed)
    assert note.startswith("採点の外のファイルが書き換えられました（") and "元に戻しました" in note


def test_watch_covers_the_installed_grader(tmp_path):
    watch = isolate.Watch()
    assert str(isolate.PACKAGE_DIR / "grading" / "inkernel.py") in watch.saved
    assert isolate.outside_note([str(isolate.PACKAGE_DIR / "grading" / "inkernel.py")]).count("ch6/grading/inkernel.py") == 1


def test_bwrap_argv_writes_only_in_the_scratch_and_hides_the_rest(tmp_path):
    subs, scratch = tmp_path / "subs", tmp_path / "scratch"
    subs.mkdir()
    scratch.mkdir()
    argv = isolate.bwrap_argv([sys.executable, "-V"], str(scratch), hide=[subs])
    assert argv[0] == "bwrap" and argv[-2:] == [sys.executable, "-V"]
    pairs = list(zip(argv, argv[1:]))
    assert [b for a, b in pairs if a == "--bind"] == [os.path.realpath(scratch)]  # 書けるのは作業フォルダだけ
    hidden = {b for a, b in pairs if a == "--tmpfs"}
    for secret in (subs, Path.home(), Path.cwd()):  # 提出物、ホーム、採点を始めたフォルダは空の一時フォルダで隠す
        assert any(isolate._inside(os.path.realpath(secret), h) for h in hidden), secret
    ro = {b for a, b in pairs if a == "--ro-bind"}
    assert str(ROOT) not in ro  # 講座のチェックアウト（solutions/ がある）は戻さない。ch6 だけ
    assert "--unshare-pid" in argv and "--die-with-parent" in argv


@needs_bwrap
def test_bubblewrap_lets_a_process_write_only_its_scratch(tmp_path):
    subs, scratch, book = tmp_path / "subs", tmp_path / "scratch", tmp_path / "course" / "gradebook.db"
    subs.mkdir()
    scratch.mkdir()
    book.parent.mkdir()
    (subs / "victim.ipynb").write_text("victim")
    book.write_text("grades")
    code = (f"import os\nfrom pathlib import Path\nPath('mine.txt').write_text('ok')\n"
            f"print(os.path.exists({str(subs)!r}), os.path.exists({str(book)!r}))\n"
            f"try:\n    open({str(isolate.PACKAGE_DIR / 'grading' / 'inkernel.py')!r}, 'a').write('#')\n"
            "except OSError as e:\n    print(e.errno)\n"
            "import ch6; print(ch6.__file__)\n")
    argv = isolate.bwrap_argv([sys.executable, "-c", code], str(scratch), hide=[subs, book.parent])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False False", " ".join(argv)  # ほかの提出物と成績簿は見えない
    assert lines[1] == "30"           # 採点のしくみは読み取り専用（EROFS）
    assert lines[2] == str(isolate.PACKAGE_DIR / "__init__.py")
    assert (scratch / "mine.txt").read_text() == "ok"
    assert (subs / "victim.ipynb").read_text() == "victim" and book.read_text() == "grades"


def test_nbgrader_course_paths_and_the_autograde_step():
    paths = isolate.course_paths("sqlite:////home/t/course/gradebook.db")
    assert paths[0] == Path("/home/t/course/gradebook.db")
    assert Path("/home/t/course/submitted") in paths and Path("/home/t/course/autograded") in paths
    assert isolate.course_paths("postgresql://x") == []
    from ch6.grading import nbgrader

    class C(dict):
        def __getattr__(self, k):
            return self.setdefault(k, C())

        def __setattr__(self, k, v):
            self[k] = v

    c = C()
    try:
        nbgrader.configure(c)
    except ImportError:  # nbgrader のない環境（validate の差し替えだけが nbgrader を要る）
        pass
    assert c["Autograde"]["autograde_preprocessors"][0] == "ch6.grading.autograde.Execute"  # 隔離は execute の中
