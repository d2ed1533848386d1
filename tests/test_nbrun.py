"""ch6.nbrun: 保存する出力からローカルパスを除き、実行のたびに変わるメタデータを落とす。"""
import nbformat

from ch6 import nbrun


def test_error_output_is_stored_without_local_paths():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    nb.cells[0].outputs = [nbformat.v4.new_output(
        "error", ename="TracerBoolConversionError",
        evalue="This BatchTracer with object id 140123 was created on line:\n  /tmp/ipykernel_4242/123456.py:2:7 (f)",
        traceback=["File /home/me/.venv/lib/python3.11/site-packages/jax/_src/core.py:1 in f", "..."])]
    nb.cells[0].metadata["execution"] = {"iopub.status.busy": "2026-01-01"}
    nbrun.clean(nb)
    out = nb.cells[0].outputs[0]
    assert out.evalue == "This BatchTracer with object id N was created on line:\n  <cell>:2:7 (f)"
    assert out.traceback == ["TracerBoolConversionError: " + out.evalue]
    assert "execution" not in nb.cells[0].metadata
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_kernel_env_sets_devices_and_platform():
    env = nbrun.kernel_env(devices=2)
    assert env["JAX_NUM_CPU_DEVICES"] == "2" and env["JAX_PLATFORMS"] == "cpu"


def test_execute_runs_top_to_bottom(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nprint(os.environ['JAX_NUM_CPU_DEVICES'])"),
        nbformat.v4.new_code_cell("raise ValueError('shown')", metadata={"tags": ["raises-exception"]}),
    ])
    nb, secs = nbrun.execute(nb, cwd=tmp_path, devices=3)
    assert nb.cells[0].outputs[0]["text"] == "3\n"
    assert nb.cells[1].outputs[0]["ename"] == "ValueError"
    assert [c.execution_count for c in nb.cells] == [1, 2] and secs > 0


def test_sanitising_rules_are_idempotent():
    text = "at 0x7f3a2b object id 12 took 3.5 ms in /tmp/ipykernel_77/123.py"
    once = text
    for pattern, repl in nbrun.sanitizers():
        once = pattern.sub(repl, once)
    twice = once
    for pattern, repl in nbrun.sanitizers():
        twice = pattern.sub(repl, twice)
    assert once == twice == "at 0xADDR object id N took TIME in <cell>"


def test_consecutive_streams_are_merged_so_stored_outputs_do_not_depend_on_timing():
    outs = [{"output_type": "stream", "name": "stdout", "text": "a = 1"},
            {"output_type": "stream", "name": "stdout", "text": ["\n", "b = 2\n"]},
            {"output_type": "stream", "name": "stderr", "text": "warn\n"},
            {"output_type": "stream", "name": "stdout", "text": "c\n"}]
    merged = nbrun.coalesce_streams(outs)
    assert [o["name"] for o in merged] == ["stdout", "stderr", "stdout"]
    assert merged[0]["text"] == "a = 1\nb = 2\n"


def test_write_replaces_the_file_so_a_reader_never_sees_it_empty(tmp_path):
    """書き換えの途中で読む人（make test-site がノートブックを読む間に、ほかの人が出力を更新する）は、
    前の全文か新しい全文を読み、空のファイルは読まない：書き終えた写しで置き換える。"""
    path = tmp_path / "a.ipynb"
    old = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("old = 1")])
    new = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("new = 2")])
    nbrun.write(old, path)
    with open(path, encoding="utf-8") as reader:  # 書き換える前に開いた読み手
        nbrun.write(new, path)
        assert reader.read() == nbrun.writes(old)
    assert path.read_text(encoding="utf-8") == nbrun.writes(new)
    assert [p.name for p in tmp_path.iterdir()] == ["a.ipynb"]
