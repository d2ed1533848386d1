"""採点を偽る攻撃のうち、2 つの採点（ch6-grade の tests/test_grade.py と nbgrader の往復 tests/grading/
test_nbgrader_roundtrip.py）が同じコードで試すもの。"""

# 採点の最中も生きているスレッドが、読み込み直した ch6._core の run_check を「いつも正解」に替え続ける
THREAD_SWAP = ("import sys, threading, time\n"
               "def swap():\n"
               "    while True:\n"
               "        core = sys.modules.get('ch6._core')\n"
               "        if core is not None and getattr(core.run_check, '__name__', '') != 'always':\n"
               "            def always(eid, fn, core=core):\n"
               "                return core.Result(eid, core.Status.PASS, 'ok')\n"
               "            core.run_check = always\n"
               "        time.sleep(0.001)\n"
               "threading.Thread(target=swap, daemon=True).start()")

# issue 47: 採点の準備で ch6.grading.inkernel を読み込み直すとき、学習者の探し方（finder）が「いつも正解」の採点を返す。
# sys.path_importer_cache に ch6/grading のフォルダのものとして入れる（importlib という語を使わずに）
FINDER = '''import sys, ch6.grading.model
folder = ch6.grading.__path__[0]
Spec = type(sys.__spec__)
class Loader:
    def create_module(self, spec):
        return None
    def exec_module(self, m):
        core = sys.modules["ch6._core"]
        def grader(emit, user_ns):
            emit(dict(kind="setup", origin=core.__file__))
            def grade(eid):
                emit(dict(id=eid, title="?", status="pass", message="ok"))
            return grade
        m.grader = grader
class Finder:
    def find_spec(self, name, target=None):
        if name == "ch6.grading.inkernel":
            return Spec(name, Loader(), origin=folder + "/inkernel.py")
        return real.find_spec(name, target)
    def invalidate_caches(self):
        pass
real = sys.path_importer_cache[folder]
sys.path_importer_cache[folder] = Finder()
'''

# 採点を偽る攻撃（issue 47）: 名前 -> (学習者のセル、採点の備考に出るはずの見つかったもの)。白紙の提出物に足して、
# ch6-grade（tests/grading/test_isolation_attacks.py）と nbgrader の往復（tests/grading/test_nbgrader_attacks.py）で試す
FORGERIES = {
    "finder": (FINDER, "sys.path_importer_cache の Finder（ch6/grading）"),
    "allclose": ("import numpy\nnumpy.allclose = lambda *a, **k: True\n", "numpy.allclose"),
    "ufunc": ("import numpy as np\nnp.abs = lambda x: x * 0\n", "numpy.abs"),
    "jnp": ("import jax.numpy as jnp\njnp.allclose = lambda *a, **k: True\n", "jax.numpy.allclose"),
    "defaults": ("import numpy.testing as t\nt.assert_allclose.__defaults__ = (1e9, 1e9, True, '', True)\n",
                 "assert_allclose.__defaults__"),
}
