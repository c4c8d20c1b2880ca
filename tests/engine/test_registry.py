"""The registry: every registered (op, version) exists in onnx.defs; resolution picks the right version."""

from __future__ import annotations

import numpy as np
import onnx.defs
import pytest
from onnx import helper

from onnxrt import registry
from onnxrt.errors import UnsupportedOperatorError
from onnxrt.ops_cpu import OpRun
from onnxrt.registry import RegistryError, register

SCHEMA_VERSIONS: dict[tuple[str, str], set[int]] = {}
for _s in onnx.defs.get_all_schemas_with_history():
    SCHEMA_VERSIONS.setdefault((_s.domain, _s.name), set()).add(_s.since_version)

OFFICIAL_DOMAINS = {"", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"}


def test_every_registered_version_exists_in_onnx_defs():
    table = registry.registered()
    assert table, "nothing registered"
    bad = []
    for (domain, op), versions in table.items():
        if domain not in OFFICIAL_DOMAINS:
            continue  # custom domains registered by tests
        versions = [v for v in versions if getattr(table[(domain, op)][v], "off_spec_note", None) is None]
        if not versions:
            continue  # operators outside the specification (ops_cpu.op_legacy): tested in test_exporter_quirks
        known = SCHEMA_VERSIONS.get((domain, op))
        if known is None:
            bad.append(f"{domain}:{op} has no schema")
            continue
        bad.extend(f"{domain}:{op} version {v} is not a schema version {sorted(known)}" for v in versions if v not in known)
    assert not bad, "\n".join(bad)


def test_registered_versions_cover_every_schema_version_from_the_first():
    """A registered operator serves every version onnx defines from its first registered one on."""
    table = registry.registered()
    gaps = []
    for (domain, op), versions in table.items():
        known = SCHEMA_VERSIONS.get((domain, op))
        if not known:
            continue
        missing = sorted(v for v in known if v >= min(versions) and v not in versions)
        if missing:
            gaps.append(f"{domain}:{op} lacks {missing}")
    assert not gaps, "\n".join(gaps)


def test_resolution_picks_highest_version_not_above_opset():
    cls, since = registry.resolve("ScatterElements", "", 17)
    assert since == 16 and cls.__name__ == "ScatterElements"
    assert registry.resolve("ScatterElements", "ai.onnx", 25)[1] == 18
    with pytest.raises(UnsupportedOperatorError, match=r"opset 10; onnxrt implements versions \[11, 13, 16, 18\]"):
        registry.resolve("ScatterElements", "", 10)


def test_duplicate_registration_fails():
    @register("DupOp", versions=(1,), domain="test.dup")
    class A(OpRun):
        pass

    with pytest.raises(RegistryError, match="registered twice"):

        @register("DupOp", versions=(1,), domain="test.dup")
        class B(OpRun):
            pass


def test_family_table_one_line_per_operator():
    from onnxrt.ops_cpu import family_unary

    assert {s.name for s in family_unary.UNARY} <= {name for (d, name) in registry.registered() if d == ""}
    node = helper.make_node("Relu", ["x"], ["y"])
    (y,) = family_unary.Relu(node).run(np.array([-1.0, 2.0], np.float32))
    np.testing.assert_array_equal(y, [0.0, 2.0])
    assert y.dtype == np.float32


def test_register_function_replace_for_rerun_cells_and_registry_error_exported():
    import numpy as np
    import pytest
    from onnx import TensorProto

    import onnxrt

    from ..helpers import make_single_node_model

    model = make_single_node_model("Twice", [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])],
                                   domain="test.replace")
    x = np.array([1.0, -2.0], np.float32)
    onnxrt.register_function("Twice", lambda x: x * 2, domain="test.replace")
    with pytest.raises(onnxrt.RegistryError, match="registered twice"):
        onnxrt.register_function("Twice", lambda x: x * 3, domain="test.replace")
    old = onnxrt.InferenceSession(model.SerializeToString())
    onnxrt.register_function("Twice", lambda x: x * 3, domain="test.replace", replace=True)  # the cell run again
    (y,) = onnxrt.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(y, [3.0, -6.0])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(old.run(None, {"x": x})[0], [2.0, -4.0])  # built before: keeps its kernel
    assert issubclass(onnxrt.RegistryError, onnxrt.OnnxRuntimeError) and "RegistryError" in onnxrt.__all__
    from onnxrt.registry import RegistryError

    assert RegistryError is onnxrt.RegistryError


def test_kernel_modules_import_at_the_first_lookup_and_concurrent_first_lookups_see_the_whole_table():
    """import onnxrt imports no kernel module (they cost 50-70 ms), a session those of its
    operators only; eight threads building their first sessions at once all find their
    kernels (none sees a module's registrations half done)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys, threading
        import numpy as np
        from onnx import TensorProto, helper
        import onnxrt
        before = sorted(m for m in sys.modules if m.startswith(("onnxrt.ops_cpu.op_", "onnxrt.ops_ml.op_")))
        ops = ["Where", "Celu", "TopK", "Einsum", "ReduceL2", "Trilu", "Mish", "Hardmax"]
        results, barrier = {}, threading.Barrier(len(ops))

        def build(op):
            vi = helper.make_tensor_value_info
            if op == "Where":
                node = helper.make_node(op, ["c", "x", "x"], ["y"])
                ins = [vi("c", TensorProto.BOOL, [3]), vi("x", TensorProto.FLOAT, [3])]
            elif op == "TopK":
                node = helper.make_node(op, ["x", "k"], ["y", "i"])
                ins = [vi("x", TensorProto.FLOAT, [3]), vi("k", TensorProto.INT64, [1])]
            elif op == "Einsum":
                node = helper.make_node(op, ["x"], ["y"], equation="i->i")
                ins = [vi("x", TensorProto.FLOAT, [3])]
            elif op == "Trilu":
                node = helper.make_node(op, ["x"], ["y"])
                ins = [vi("x", TensorProto.FLOAT, [3, 3])]
            else:
                node = helper.make_node(op, ["x"], ["y"])
                ins = [vi("x", TensorProto.FLOAT, [3])]
            outs = [vi(o, 0, None) for o in node.output]
            model = helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=[helper.make_opsetid("", 18)])
            barrier.wait()
            try:
                onnxrt.InferenceSession(model.SerializeToString())
                results[op] = "ok"
            except Exception as e:
                results[op] = f"{type(e).__name__}: {e}"

        threads = [threading.Thread(target=build, args=(op,)) for op in ops]
        [t.start() for t in threads]
        [t.join() for t in threads]
        after = [m for m in sys.modules if m.startswith(("onnxrt.ops_cpu.op_", "onnxrt.ops_ml.op_"))]
        onnxrt.registry.registered()  # the whole table imports them all
        whole = [m for m in sys.modules if m.startswith(("onnxrt.ops_cpu.op_", "onnxrt.ops_ml.op_"))]
        print(before, sorted(results.items()), 0 < len(after) < 20 < len(whole))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    ops = ["Celu", "Einsum", "Hardmax", "Mish", "ReduceL2", "TopK", "Trilu", "Where"]
    assert out.stdout.strip() == f"[] {[(op, 'ok') for op in ops]} True"


def test_kernel_index_is_current():
    """onnxrt/_kernel_index.py lists, for every operator, every module registering one of its
    versions: a session that imports only those resolves exactly as the whole table does."""
    import importlib.util
    from pathlib import Path

    from onnxrt import _kernel_index
    from onnxrt.registry import kernel_modules

    assert _kernel_index.MODULES == kernel_modules(), "onnxrt/_kernel_index.py is stale: run python scripts/gen_kernel_index.py"
    spec = importlib.util.spec_from_file_location("gen", Path(__file__).resolve().parents[2] / "scripts" / "gen_kernel_index.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert Path(_kernel_index.__file__).read_text(encoding="utf-8") == gen.text()
