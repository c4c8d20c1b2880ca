"""mlprodict's module paths: every registered operator imports as onnxrt.ops_cpu.op_<snake>.<OpType>."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxrt.ops_cpu import OpRun, _modules
from onnxrt.ops_cpu._op import get_schema
from onnxrt.registry import register_function, registered

_BODY = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["y"])], "body",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
)

_LOOP_BODY = helper.make_graph(
    [helper.make_node("Identity", ["cond"], ["cond_out"])], "loop_body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])],
)
_MAP_BODY = helper.make_graph(
    [helper.make_node("Add", ["a", "b"], ["c"])], "map_body",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1])],
)

#: attributes a node needs before its kernel accepts it (required ones, or one of a choice)
NEEDED: dict[str, dict] = {
    "BitCast": {"to": TensorProto.INT32},
    "BitShift": {"direction": "LEFT"},
    "Cast": {"to": TensorProto.FLOAT},
    "Concat": {"axis": 1},
    "ConcatFromSequence": {"axis": 0},
    "Constant": {"value_ints": [1, 2]},
    "Crop": {"border": [1, 1, 1, 1]},
    "DepthToSpace": {"blocksize": 2},
    "Einsum": {"equation": "ij,jk->ik"},
    "GroupNormalization": {"num_groups": 2},
    "If": {"then_branch": _BODY, "else_branch": _BODY},
    "LRN": {"size": 3},
    "LinearAttention": {"q_num_heads": 2, "kv_num_heads": 2},
    "Loop": {"body": _LOOP_BODY},
    "AveragePool": {"kernel_shape": [2, 2]},
    "LpPool": {"kernel_shape": [2, 2]},
    "MaxPool": {"kernel_shape": [2, 2]},
    "MaxRoiPool": {"pooled_shape": [2, 2]},
    "MaxUnpool": {"kernel_shape": [2, 2]},
    "ParametricSoftplus": {"alpha": 1.5, "beta": 0.5},
    "RandomNormal": {"shape": [2, 3]},
    "RandomUniform": {"shape": [2, 3]},
    "RegexFullMatch": {"pattern": "a+"},
    "ScaledTanh": {"alpha": 1.5, "beta": 0.5},
    "Scan": {"num_scan_inputs": 1, "body": _BODY},
    "SequenceMap": {"body": _MAP_BODY},
    "SpaceToDepth": {"blocksize": 2},
    "TfIdfVectorizer": {
        "mode": "TF", "min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0,
        "ngram_counts": [0], "ngram_indexes": [0, 1], "pool_int64s": [5, 7],
    },
    "DictVectorizer": {"int64_vocabulary": [1, 2]},
    "Imputer": {"imputed_value_floats": [0.5], "replaced_value_float": 1.0},
    "LabelEncoder": {"keys_int64s": [1, 2], "values_int64s": [3, 4]},
    "LinearClassifier": {"coefficients": [1.0, 2.0], "classlabels_ints": [0, 1]},
    "OneHotEncoder": {"cats_int64s": [1, 2]},
    "SVMClassifier": {
        "classlabels_ints": [0, 1], "coefficients": [1.0, -1.0], "vectors_per_class": [1, 1],
        "support_vectors": [0.0, 1.0], "rho": [0.5], "kernel_type": "LINEAR",
    },
    "TreeEnsemble": {
        "n_targets": 1, "tree_roots": [0], "nodes_modes": numpy_helper.from_array(np.array([0], np.uint8), "m"),
        "nodes_featureids": [0], "nodes_splits": numpy_helper.from_array(np.array([0.5], np.float32), "s"),
        "nodes_truenodeids": [0], "nodes_trueleafs": [1], "nodes_falsenodeids": [1], "nodes_falseleafs": [1],
        "leaf_targetids": [0, 0], "leaf_weights": numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w"),
    },
    "TreeEnsembleClassifier": {
        "classlabels_int64s": [0, 1], "nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
        "nodes_featureids": [0, 0, 0], "nodes_values": [0.5, 0.0, 0.0],
        "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"], "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0], "class_treeids": [0, 0], "class_nodeids": [1, 2],
        "class_ids": [0, 1], "class_weights": [1.0, 1.0],
    },
    "TreeEnsembleRegressor": {
        "n_targets": 1, "nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
        "nodes_featureids": [0, 0, 0], "nodes_values": [0.5, 0.0, 0.0],
        "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"], "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0], "target_treeids": [0, 0], "target_nodeids": [1, 2],
        "target_ids": [0, 0], "target_weights": [1.0, 2.0],
    },
    "ZipMap": {"classlabels_int64s": [0, 1]},
    "Gradient": {"xs": ["a"], "y": "b"},
    "Momentum": {"alpha": 0.9, "beta": 0.1, "mode": "standard", "norm_coefficient": 0.0},
}

BUILTIN_DOMAINS = {"", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "onnxrt"}
BUILTIN = sorted(k for k in registered() if k[0] in BUILTIN_DOMAINS)


def _gradient_in_a_model():
    """Gradient differentiates the graph holding it: its instance comes from a session's plan."""
    from onnxrt import OnnxInference

    nodes = [
        helper.make_node("Mul", ["a", "a"], ["b"]),
        helper.make_node("Gradient", ["a"], ["da"], domain="ai.onnx.preview.training", xs=["a"], y="b"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("da", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.preview.training", 1)])
    oinf = OnnxInference(model)
    (step,) = [st for st in oinf.plain_plan.steps if st.op_type == "Gradient"]
    _, da = oinf.run_outputs({"a": np.array([1.0, 3.0], np.float32)})
    np.testing.assert_allclose(da, [2.0, 6.0])
    return step.op, nodes[1]


def _value(att: onnx.AttributeProto):
    return onnx.helper.get_attribute_value(att)


@pytest.mark.parametrize(("domain", "op_type"), BUILTIN, ids=[f"{d or 'ai.onnx'}:{o}" for d, o in BUILTIN])
def test_every_operator_imports_by_its_module_path(domain, op_type):
    versions = registered()[(domain, op_type)]
    newest_version = max(versions)
    newest = versions[newest_version]
    names = _modules.module_names(op_type)
    assert names[0] == "op_" + _modules.stem(op_type)
    for name in names:
        mod = importlib.import_module(f"onnxrt.ops_cpu.{name}")
        assert getattr(mod, op_type) is newest, (name, op_type)
        # every class serving a version is reachable from the module
        exposed = {v for v in vars(mod).values() if isinstance(v, type)}
        assert set(versions.values()) <= exposed, (name, op_type)
        assert mod.__doc__ and "\n" not in mod.__doc__.strip()

    # the signature properties on an instance built from a node made by onnx.helper
    atts = NEEDED.get(op_type, {})
    schema = get_schema(op_type, newest_version, domain)
    inputs = [p.name for p in schema.inputs] if schema is not None else list(newest.input_names)
    node = helper.make_node(op_type, inputs, ["y"], domain=domain, **atts)
    if op_type == "Gradient":
        op, node = _gradient_in_a_model()
    else:
        op = newest(node, since_version=newest_version)
    assert isinstance(op, OpRun)
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    if schema is not None:
        assert op.args_mandatory == [p.name for p in schema.inputs if p.option != optional]
        assert op.args_optional == [p.name for p in schema.inputs if p.option == optional]
        assert set(op.atts_value) >= set(schema.attributes)
    assert op.args_default[: len(inputs)] == inputs
    assert op.args_mandatory + op.args_optional == sorted(
        inputs, key=lambda n: (n in op.args_optional, inputs.index(n))
    )
    given = {a.name: _value(a) for a in node.attribute}
    for name, value in given.items():
        if name in op.atts_value and isinstance(value, (int, float, str, bytes)):
            assert op.atts_value[name] in (value, value.decode() if isinstance(value, bytes) else value)
    # a parameter shows in args_default_modified exactly when it differs from its default
    defaults = dict(a.split("=", 1) for a in op.args_default[len(inputs):] if "=" in a)
    for entry in op.args_default_modified:
        name, shown = entry.split("=", 1)
        assert name in op.atts_value
        assert defaults.get(name) != shown
    for name, shown in defaults.items():
        if name not in given:
            assert not any(e.startswith(name + "=") for e in op.args_default_modified), (name, shown)


def test_named_paths_of_the_issue():
    from onnxrt.ops_cpu.op_reduce_log_sum_exp import ReduceLogSumExp
    from onnxrt.ops_cpu.op_reduce_sum import ReduceSum, reduce_sum
    from onnxrt.ops_cpu.op_relu import Relu, relu
    from onnxrt.ops_cpu.op_tree_ensemble_classifier import TreeEnsembleClassifier
    from onnxrt.ops_ml.op_tree_ensemble import TreeEnsembleClassifier as TEC
    import onnxrt.ops_cpu.op_qlinear_conv
    import onnxrt.ops_cpu.op_scatter_elements as se

    table = registered()
    assert Relu is table[("", "Relu")][14] and ReduceSum is table[("", "ReduceSum")][13]
    assert ReduceLogSumExp is table[("", "ReduceLogSumExp")][18]
    assert TreeEnsembleClassifier is TEC
    assert se.__file__.endswith("op_scatter_elements.py")  # a real file stays what it is
    np.testing.assert_array_equal(relu(np.array([-1.0, 2.0], np.float32)), [0.0, 2.0])
    np.testing.assert_array_equal(reduce_sum(np.arange(6.0).reshape(2, 3), (1,), False), [3.0, 12.0])


def test_modules_holding_several_operators():
    import onnxrt.ops_cpu.op_greater as greater
    import onnxrt.ops_cpu.op_layer_normalization as ln
    import onnxrt.ops_cpu.op_normalization as normalization
    import onnxrt.ops_cpu.op_random as random

    table = registered()
    assert greater.Greater is table[("", "Greater")][13]
    assert greater.GreaterOrEqual is table[("", "GreaterOrEqual")][16]
    assert greater.__all__ == ["Greater", "greater", "GreaterOrEqual", "greater_or_equal"]
    # LayerNormalization: op_normalization's class from 17, op_legacy's experimental one at 1
    assert ln.LayerNormalization is normalization.LayerNormalization
    assert ln.LayerNormalization_1 is table[("", "LayerNormalization")][1]
    assert ln.LayerNormalization_1.__module__ == "onnxrt.ops_cpu.op_legacy"
    # each operator of a file holding several has its own path too
    for op_type in ("GroupNormalization", "InstanceNormalization", "LpNormalization", "RMSNormalization"):
        mod = importlib.import_module(f"onnxrt.ops_cpu.op_{_modules.snake_case(op_type)}")
        assert getattr(mod, op_type) is getattr(normalization, op_type)
    assert {"Bernoulli", "RandomNormal", "RandomUniformLike"} <= set(vars(random))


def test_mlprodict_spellings():
    assert _modules.stem("ReduceLogSumExp") == "reduce_log_sum_exp"
    assert _modules.stem("QLinearConv") == "qlinear_conv"
    assert _modules.stem("SVMClassifier") == "svm_classifier"
    assert _modules.stem("RMSNormalization") == "rms_normalization"
    assert _modules.stem("GatherND") == "gathernd"
    assert _modules.stem("CumSum") == "cum_sum"
    assert _modules.stem("IsNaN") == "isnan"
    assert _modules.stem("TreeEnsembleClassifier") == "tree_ensemble_classifier"
    from onnxrt.ops_cpu.op_cum_sum import CumSum
    from onnxrt.ops_cpu.op_cumsum import CumSum as FileCumSum
    from onnxrt.ops_cpu.op_gathernd import GatherND
    from onnxrt.ops_cpu.op_gather_nd import GatherND as FileGatherND

    assert CumSum is FileCumSum and GatherND is FileGatherND


def test_generated_module_docstring_and_unknown_names():
    mod = importlib.import_module("onnxrt.ops_cpu.op_add")
    assert mod.__doc__ == (
        "Operator module path onnxrt.ops_cpu.op_add, generated: Add (ai.onnx) from onnxrt.ops_cpu.family_binary."
    )
    assert mod.__spec__.origin == _modules.ORIGIN and not hasattr(mod, "__file__")
    assert importlib.reload(mod).Add is registered()[("", "Add")][14]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("onnxrt.ops_cpu.op_no_such_operator")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("onnxrt.ops_cpu.op_add.deeper")


def test_custom_operators_get_a_path_too():
    cls = register_function("Cubed", lambda x: x ** 3, domain="test.op_modules", replace=True)
    mod = importlib.import_module("onnxrt.ops_cpu.op_cubed")
    assert mod.Cubed is cls


def test_import_onnxrt_builds_no_module():
    code = (
        "import sys, onnxrt\n"
        "from onnxrt.ops_cpu import OperatorModuleFinder\n"
        "assert sum(isinstance(f, OperatorModuleFinder) for f in sys.meta_path) == 1\n"
        "assert 'onnxrt.ops_cpu._modules' not in sys.modules\n"
        "gen = [m for m in sys.modules if getattr(getattr(sys.modules[m], '__spec__', None), 'origin', '') == 'generated from onnxrt.registry']\n"
        "print(len(gen))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_a_custom_operator_sharing_a_builtin_name_gets_a_suffix():
    # in a fresh process: the registry is process-wide
    code = (
        "import onnxrt\n"
        "from onnxrt.registry import registered\n"
        "cls = onnxrt.register_function('Relu', lambda x: x, domain='my.ops')\n"
        "import onnxrt.ops_cpu.op_relu as m\n"
        "assert m.Relu is registered()[('', 'Relu')][14]\n"
        "assert m.Relu_my_ops is cls\n"
        "assert 'Relu (my.ops) from onnxrt.registry' in m.__doc__\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
