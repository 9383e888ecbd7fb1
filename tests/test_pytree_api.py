"""fusegrad.flatten / ravel_pytree and register_pytree_node."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ad.pytree import flatten, structure


class Affine:
    def __init__(self, w, b):
        self.w, self.b = w, b


fg.register_pytree_node(Affine, lambda a: ((a.w, a.b), "affine"), lambda aux, c: Affine(*c))


def test_ravel_round_trip_keeps_shapes_and_dtypes():
    tree = {"w": np.arange(6.0).reshape(2, 3), "b": 0.5, "k": (np.ones(2, np.float32), [2.0])}
    vec, unflatten = fg.flatten(tree)
    assert vec.shape == (10,) and vec.dtype == np.float64
    back = unflatten(vec)
    np.testing.assert_array_equal(back["w"], tree["w"])
    assert back["b"] == 0.5 and isinstance(back["b"], float)
    assert back["k"][0].dtype == np.float32 and back["k"][1] == [2.0]
    with pytest.raises(ValueError, match="needs a vector of 10 elements"):
        unflatten(np.zeros(3))


def test_ravel_of_an_empty_tree():
    vec, unflatten = fg.ravel_pytree({})
    assert vec.shape == (0,)
    assert unflatten(vec) == {}


def test_flatten_inside_a_gradient():
    def loss(params):
        vec, _ = fg.flatten(params)
        return np.sum(vec**2)

    params = {"w": np.array([[1.0, 2.0]]), "b": 3.0}
    g = fg.grad(loss)(params)
    np.testing.assert_allclose(g["w"], 2 * params["w"])
    assert g["b"] == pytest.approx(6.0)


def test_unflatten_inside_a_gradient():
    _, unflatten = fg.flatten({"w": np.zeros((2, 2)), "b": np.zeros(2)})

    def loss(vec):
        p = unflatten(vec)
        return np.sum(p["w"] @ p["b"]) + np.sum(p["b"] ** 2)

    vec = np.arange(6.0)
    eps, fd = 1e-6, []
    for i in range(6):
        e = np.zeros(6)
        e[i] = eps
        fd.append((loss(vec + e) - loss(vec - e)) / (2 * eps))
    np.testing.assert_allclose(fg.grad(loss)(vec), fd, rtol=1e-6)


def test_registered_class_as_an_argument_and_gradient():
    a = Affine(np.array([1.0, -2.0]), 0.5)
    x = np.array([3.0, 4.0])
    g = fg.grad(lambda p: np.sum(p.w * x) + p.b**2)(a)
    assert isinstance(g, Affine)
    np.testing.assert_allclose(g.w, x)
    assert g.b == pytest.approx(1.0)
    leaves, _, key = structure(a)
    assert len(leaves) == 2 and "affine" in key


def test_registered_class_under_jit():
    f = fg.jit(fg.grad(lambda p, x: np.sum(p.w * x * x)))
    x = np.array([3.0, 4.0])
    for w in (np.array([1.0, 2.0]), np.array([5.0, 6.0])):
        np.testing.assert_allclose(f(Affine(w, 0.0), x).w, x * x)


def test_register_refuses_builtin_containers_and_non_classes():
    with pytest.raises(ValueError, match="already a pytree node"):
        fg.register_pytree_node(dict, None, None)
    with pytest.raises(TypeError, match="needs a class"):
        fg.register_pytree_node(Affine(1, 2), None, None)


def test_scipy_minimize_on_structured_parameters():
    optimize = pytest.importorskip("scipy.optimize")
    target = {"w": np.array([1.0, -2.0, 0.5]), "b": 3.0}

    def loss(p):
        return np.sum((p["w"] - target["w"]) ** 2) + (p["b"] - target["b"]) ** 2

    x0, unflatten = fg.flatten({"w": np.zeros(3), "b": 0.0})
    vg = fg.value_and_grad(lambda v: loss(unflatten(v)))
    res = optimize.minimize(vg, x0, jac=True, method="L-BFGS-B")
    best = unflatten(res.x)
    np.testing.assert_allclose(best["w"], target["w"], atol=1e-6)
    assert best["b"] == pytest.approx(3.0, abs=1e-6)
    assert flatten(best)[0]  # still a tree


def test_tangents_and_cotangents_must_have_their_primals_structure():
    # leaves are paired by position: a list of tangents for a dict of primals paired them in
    # the dict's sorted-key order (w's tangent went to b): a silently wrong product
    p = {"w": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    tw, tb = np.array([1.0, 0.0]), np.zeros(2)

    def f(p):
        return p["w"] * 2.0 + p["b"] * 100.0

    np.testing.assert_array_equal(fg.jvp(f, (p,), ({"b": tb, "w": tw},))[1], [2.0, 0.0])
    for bad in ([tw, tb], {"x": tw, "y": tb}, (tw, tb)):
        with pytest.raises(ValueError, match=r"tangent's structure .* is not its primal's"):
            fg.jvp(f, (p,), (bad,))
    out, pullback = fg.vjp(lambda x: {"w": x * 2.0, "b": x * 100.0}, np.ones(2))
    np.testing.assert_array_equal(pullback({"w": np.ones(2), "b": np.zeros(2)})[0], [2.0, 2.0])
    with pytest.raises(ValueError, match=r"cotangent's structure \(tuple of 2\) is not the"):
        pullback((np.ones(2), np.zeros(2)))
    # a tuple and a list of the same length pair alike
    out, pullback = fg.vjp(lambda x: (x * 2.0, x * 3.0), np.ones(2))
    np.testing.assert_array_equal(pullback([np.ones(2), np.ones(2)])[0], [5.0, 5.0])


def test_ordered_and_default_dicts_keep_their_kind_and_order():
    import collections

    od = collections.OrderedDict([("z", np.ones(2)), ("a", np.full(2, 2.0))])
    g = fg.grad(lambda d: np.sum(d["z"] * d["a"]))(od)
    assert type(g) is collections.OrderedDict and list(g) == ["z", "a"]
    np.testing.assert_array_equal(g["z"], [2.0, 2.0])
    dd = collections.defaultdict(list, {"x": np.ones(2)})
    g = fg.grad(lambda d: np.sum(d["x"] ** 2))(dd)  # (a crash in the pytree code before)
    assert type(g) is collections.defaultdict and g.default_factory is list
    np.testing.assert_array_equal(g["x"], [2.0, 2.0])


def test_jacobian_of_pytree_outputs_and_hessian_of_pytree_inputs():
    # a one-leaf dict output gave "the cotangent has shape ()"; hessian of a dict refused it
    x = np.array([0.5, -1.2, 2.0])
    jd = fg.jacobian(lambda a: {"y": a**2, "s": np.sum(a)})(x)
    np.testing.assert_allclose(jd["y"], np.diag(2 * x))
    np.testing.assert_allclose(jd["s"], np.ones(3))
    jt = fg.jacobian(lambda a, b: (a * b, np.sum(a)), argnums=(0, 1))(x, 2.0)
    np.testing.assert_allclose(jt[0][0], 2.0 * np.eye(3))
    np.testing.assert_allclose(jt[0][1], x)
    # hand-derived blocks of f = |w|² b², in JAX's layout H[k1][k2]
    w, b = x, 0.3
    h = fg.hessian(lambda p: np.sum(p["w"] ** 2) * p["b"] ** 2)({"w": w, "b": b})
    np.testing.assert_allclose(h["w"]["w"], 2 * b**2 * np.eye(3))
    np.testing.assert_allclose(h["w"]["b"], 4 * b * w)
    np.testing.assert_allclose(h["b"]["w"], 4 * b * w)
    np.testing.assert_allclose(h["b"]["b"], 2 * np.sum(w**2))


def test_hessian_blocks_of_a_dict_argument():
    # with argnums=(0, 1) and a dict argument, its row of blocks became the tuple of its keys
    def f(p, c):
        return np.sum(p["a"] ** 2) * c + c**2 * np.sum(p["a"])

    p, c = {"a": np.array([1.0, 2.0])}, 1.0
    h = fg.hessian(f, argnums=(0, 1))(p, c)
    np.testing.assert_allclose(h[0]["a"][0]["a"], 2 * c * np.eye(2))
    np.testing.assert_allclose(h[0]["a"][1], 2 * p["a"] + 2 * c)
    np.testing.assert_allclose(h[1][0]["a"], 2 * p["a"] + 2 * c)
    np.testing.assert_allclose(h[1][1], 2 * np.sum(p["a"]))
