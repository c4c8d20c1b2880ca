"""Annotate failing conformance tests with the operators onnxrt lacks (used to seed expected_failures.txt).

Usage: python scripts/xfail_reasons.py FAILING_NAMES_FILE > lines.txt
"""

from __future__ import annotations

import os
import sys
import warnings

import onnx
from onnx.backend.test.loader import load_model_tests

from onnxrt import registry

ISSUE3 = set("""Abs Acos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Erf Exp Floor IsInf IsNaN Log Neg Not Reciprocal Round Sign Sin Sinh Sqrt Tan Tanh BitwiseNot
Add Sub Mul Div Pow Mod Max Min Sum Mean And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor Equal Greater GreaterOrEqual Less LessOrEqual
Relu LeakyRelu PRelu Elu Selu Celu Sigmoid HardSigmoid HardSwish Softplus Softsign ThresholdedRelu Gelu Mish Swish Shrink Clip Softmax LogSoftmax Hardmax
Cast CastLike BitCast ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin CumSum CumProd TopK Det
Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Pad Tile Expand DepthToSpace SpaceToDepth Trilu Range ConstantOfShape EyeLike OneHot Where NonZero Unique Compress ReverseSequence
MatMul MatMulInteger Gemm Einsum""".split())
ISSUE5 = set("""If Loop Scan SequenceMap SequenceEmpty SequenceConstruct SequenceInsert SequenceErase SequenceAt SequenceLength SplitToSequence ConcatFromSequence
Optional OptionalHasElement OptionalGetElement StringNormalizer StringConcat StringSplit RegexFullMatch TfIdfVectorizer Adagrad Adam Momentum Gradient FlexAttention""".split())


def issue_of(domain: str, op: str) -> int:
    if domain == "ai.onnx.ml":
        return 6
    if domain.startswith("ai.onnx.preview"):
        return 5
    if op in ISSUE3:
        return 3
    if op in ISSUE5:
        return 5
    return 4


def ops_of_graph(g: onnx.GraphProto, opsets: dict[str, int], out: set) -> None:
    for n in g.node:
        dom = n.domain if n.domain not in ("", "ai.onnx") else ""
        out.add((dom, n.op_type, opsets.get(dom, 1)))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops_of_graph(a.g, opsets, out)
            for sub in a.graphs:
                ops_of_graph(sub, opsets, out)


def main() -> None:
    failing = [l.strip() for l in open(sys.argv[1]) if l.strip()]
    failing_set = set(failing)
    cases = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("node", "simple", "pytorch-converted", "pytorch-operator"):
            for tc in load_model_tests(kind=kind):
                cases[tc.name + "_cpu"] = tc
    for name in failing:
        tc = cases.get(name)
        missing = []
        if tc is not None:
            model = tc.model if tc.model is not None else onnx.load(os.path.join(tc.model_dir, "model.onnx"))
            opsets = {(i.domain if i.domain not in ("", "ai.onnx") else ""): i.version for i in model.opset_import}
            ops: set = set()
            ops_of_graph(model.graph, opsets, ops)
            local = {(f.domain, f.name) for f in model.functions}
            for f in model.functions:
                fops = {(i.domain if i.domain not in ("", "ai.onnx") else ""): i.version for i in f.opset_import}
                for n in f.node:
                    dom = n.domain if n.domain not in ("", "ai.onnx") else ""
                    ops.add((dom, n.op_type, fops.get(dom, 1)))
            for dom, op, ver in sorted(ops):
                if (dom, op) in local:
                    continue
                if registry.lookup(op, dom, ver) is None:
                    missing.append((dom, op))
        if missing:
            names = sorted({op for _, op in missing})
            issue = min(issue_of(d, o) for d, o in missing)
            reason = f"{', '.join(names)} not implemented yet (issue {issue})"
        else:
            reason = "wrong result: to investigate"
        print(f"^{name}$  # {reason}")


if __name__ == "__main__":
    main()
