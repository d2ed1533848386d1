"""ch6.show.sharding_text: visualize_array_sharding の図を色コードなしの文字列で。"""
import jax
import jax.numpy as jnp
import nbformat
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ch6 import nbrun, show

N = jax.device_count()


def test_sharding_text_rows_plain():
    mesh = jax.make_mesh((N,), ("data",))
    x = jax.device_put(jnp.zeros((2 * N, 3)), NamedSharding(mesh, P("data", None)))
    text = show.sharding_text(x)
    assert "\x1b" not in text
    for i in range(N):
        assert f"CPU {i}" in text
    assert text.splitlines()[0].startswith("┌")
    assert text == show.sharding_text(x)  # 何度でも同じ


def test_sharding_text_replicated_lists_every_device():
    mesh = jax.make_mesh((N,), ("data",))
    text = show.sharding_text(jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P())))
    assert "CPU " + ",".join(str(i) for i in range(N)) in text
    assert "\x1b" not in text


@pytest.mark.skipif(N < 2, reason="needs 2 or more devices")
def test_sharding_text_in_a_kernel_is_one_plain_stream():
    """Jupyter では rich が表示（display）として色つきで出すが、文字列だけが stdout に残る。"""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import jax, jax.numpy as jnp\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "from ch6 import show\n"
        "mesh = jax.make_mesh((2,), ('data',))\n"
        "x = jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P('data', None)))\n"
        "print(show.sharding_text(x))")]
    nb, _ = nbrun.execute(nb, cwd=".", devices=2)
    outs = nb.cells[0].outputs
    assert [o.output_type for o in outs] == ["stream"]
    text = outs[0].text
    assert "\x1b" not in text and text.startswith("┌") and text.endswith("┘\n")
    assert [ln.strip("│ ") for ln in text.splitlines() if "CPU" in ln] == ["CPU 0", "CPU 1"]
