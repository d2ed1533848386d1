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
