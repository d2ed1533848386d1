"""6.3c-1 を 2 次元メッシュ ('host', 'local') に移す（issue 22 の 4: 講義の写しではなく一歩先へ）。
片方の軸だけの平均、in_specs の書き方の誤り、講義の 'data' のままの答えに、それぞれの言葉。"""
import jax
from jax import lax
from jax.sharding import PartitionSpec as P

from ch6 import meshes
from tests.checkhelp import expect

AX = ("host", "local")
HOSTS, LOCAL = meshes.mesh_2d_shape()


def _make(axes=AX, spec=P(AX), check_vma=True, loss_first=True):
    def make(mesh, loss_fn, lr):
        def body(params, x, y):
            if loss_first:
                loss, grads = jax.value_and_grad(lambda p: lax.pmean(loss_fn(p, x, y), axes))(params)
            else:
                loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
                loss, grads = lax.pmean(loss, axes), lax.pmean(grads, axes)
            return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), spec, spec), out_specs=P(),
                                     check_vma=check_vma))
    return make


def test_the_two_axis_answers_pass():
    expect("6.3c-1", _make(), "pass", "メッシュ", "トレースし直しませんでした")
    expect("6.3c-1", _make(check_vma=False, loss_first=False), "pass")


def test_a_mean_over_one_axis_is_named():
    # check_vma=True では、型の検査で止まる
    for axis in AX:
        expect("6.3c-1", _make(axes=axis), "fail", "varying", "lax.pmean(…, ('host', 'local'))", "両方で平均")


def test_a_mean_over_one_axis_without_vma_names_the_axis():
    # check_vma=False では値が違う: どちらの軸の中だけの平均かを言う（その軸がデバイス 1 つなら正しい）
    for axis, size in (("local", LOCAL), ("host", HOSTS)):
        fn = _make(axes=axis, check_vma=False, loss_first=False)
        if size == HOSTS * LOCAL:
            expect("6.3c-1", fn, "pass")
        elif size > 1:
            expect("6.3c-1", fn, "fail", f"'{axis}' の軸の中だけ", "2 つの軸の両方")


def test_in_specs_of_one_axis_or_two_dimensions_are_named():
    expect("6.3c-1", _make(spec=P("local")), "fail", "in_specs の P('local', None)", "P(('host', 'local'))")
    expect("6.3c-1", _make(spec=P(("local", "host")), axes=("local", "host")), "fail", "軸の順番")
    expect("6.3c-1", _make(spec=P("host", "local")), "fail", "2 次元分", "P(('host', 'local'))")


def test_the_lesson_axis_name_is_named():
    expect("6.3c-1", _make(axes="data", spec=P("data")), "fail", "メッシュにない軸", "'host' と 'local'", "'data'")
