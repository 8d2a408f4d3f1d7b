"""Serial work per inner step of a compiled meta-learning step, counted from program text (no dependencies).

Used alike for our step (``tools/op_counts.py``) and the authors' (``tools/authors_step.py``), so both sides are
counted by the same code. The inner-step loops of a program are its ``while`` loops whose trip count is the number
of inner steps (the adaptation's forward loop and, under a meta-gradient, its transposed loop), not nested in
another such loop. Per inner step is the sum over those loops of what one iteration executes, condition and body:

* :func:`stablehlo_ops`: operations of the lowered StableHLO (``jax.jit(f).lower(...).as_text()``); a call counts
  the operations of the function it calls, a nested ``while`` its trip count times one iteration, a ``case`` its
  largest branch; constants and terminators count nothing, and an operation that applies a region element-wise
  (``reduce``, ``sort``, ``scatter``) counts one;
* :func:`hlo_thunks`: instructions of the optimised HLO (``.compile().as_text()``), each fusion one; a ``call``
  counts its computation, a nested ``while`` its known trip count times one iteration, a ``conditional`` its
  largest branch; parameters, constants, tuples, their elements and bitcasts count nothing.

Each returns ``{"per_step": count, "loops": inner-step loops found, "runs": how many times per program run those
loops run in all (the product of the trip counts of the loops around each)}``.
"""

from __future__ import annotations

import json
import re
from collections import Counter

STABLEHLO_FREE = {"stablehlo.constant", "stablehlo.return", "func.return", "return"}
HLO_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}


# --------------------------------------------------------------------------------------------- StableHLO


def _op_name(line: str) -> str:
    """The operation's name on an MLIR line (``%3:2 = stablehlo.while(...``, ``%a, %b = chlo.top_k(...``,
    ``"stablehlo.case"(...``)."""
    rest = line.split(" = ", 1)[1] if re.match(r"^%[\w#:]+(, %[\w#:]+)* = ", line) else line
    return re.match(r'"?([\w.]+)', rest).group(1)


def parse_mlir(text: str) -> dict:
    """``{function name: [operation, ...]}``; an operation is ``{"name", "line", "regions": [[operation, ...]]}``
    (MLIR's pretty form: one operation per line, a line ending ``{`` opens a region, a line starting ``}`` closes
    one and may open the next, as ``} do {`` and ``}, {`` do; a ``while``'s condition opens on the line after it)."""
    functions, stack = {}, []  # stack: (operation, its open region)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("^", "//", "#")):
            continue
        if line.startswith("}"):
            op, _ = stack.pop()
            if line.endswith("{"):
                region = []
                op["regions"].append(region)
                stack.append((op, region))
            continue
        if line == "cond {":  # a while's first region, on the line after the while
            region = []
            stack[-1][1][-1]["regions"].append(region)
            stack.append((stack[-1][1][-1], region))
            continue
        if line.startswith(("module", "func.func")):
            if line.startswith("func.func"):
                op = {"name": "func.func", "line": line, "regions": [[]]}
                functions[re.search(r"@([\w.$-]+)", line).group(1)] = op["regions"][0]
                stack.append((op, op["regions"][0]))
            elif line.endswith("{"):
                stack.append(({"name": "module", "line": line, "regions": [[]]}, []))
            continue
        op = {"name": _op_name(line), "line": line, "regions": []}
        if stack:
            stack[-1][1].append(op)
        if line.endswith("{"):
            op["regions"].append([])
            stack.append((op, op["regions"][0]))
    return functions


CONSTANT = re.compile(r"^(%[\w#]+) = stablehlo\.constant dense<(-?\d+)> : tensor<[iu]\d+>")


def _constants(ops) -> dict:
    """``{SSA name: integer}`` of the scalar integer constants among ``ops`` (not in their regions)."""
    return {m.group(1): int(m.group(2)) for m in (CONSTANT.match(op["line"]) for op in ops) if m}


def _mlir_trip(op, scope: dict) -> int | None:
    """A StableHLO ``while``'s trip count: the constant bound its condition compares the counter with (``LT``),
    defined in the condition or in ``scope`` (the constants of the regions around it; a nested region may reuse
    a name)."""
    cond = op["regions"][0]
    known = {**scope, **_constants(cond)}
    for inner in cond:
        m = re.search(r"stablehlo\.compare\s+LT, %[\w#]+, (%[\w#]+)", inner["line"])
        if m and m.group(1) in known:
            return known[m.group(1)]
    return None


def _callee(line: str) -> str | None:
    m = re.search(r"(?:func\.)?call @([\w.$-]+)\(", line)
    return m.group(1) if m else None


def stablehlo_ops(text: str, inner_steps: int) -> dict:
    """Operations per inner step of the lowered StableHLO ``text`` (module docstring)."""
    functions = parse_mlir(text)
    cache = {}

    def call(op) -> Counter:
        callee = _callee(op["line"])
        if callee not in cache:
            cache[callee] = count(functions[callee], {})
        return cache[callee]

    def count(ops, scope) -> Counter:
        scope, total = {**scope, **_constants(ops)}, Counter()
        for op in ops:
            name = op["name"]
            if name in STABLEHLO_FREE:
                continue
            if name in ("func.call", "call"):
                total += call(op)
            elif name == "stablehlo.while":
                total += _times(sum((count(r, scope) for r in op["regions"]), Counter()), _mlir_trip(op, scope))
            elif name in ("stablehlo.case", "stablehlo.if"):
                total += Counter({name: 1}) + _largest(count(r, scope) for r in op["regions"])
            else:
                total[name] += 1
        return total

    found = []  # (one iteration's count, runs)

    def search(ops, scope, runs):
        scope = {**scope, **_constants(ops)}
        for op in ops:
            if op["name"] in ("func.call", "call"):
                search(functions[_callee(op["line"])], {}, runs)
            elif op["name"] == "stablehlo.while":
                trip = _mlir_trip(op, scope) or 1
                if trip == inner_steps:
                    found.append((sum((count(r, scope) for r in op["regions"]), Counter()), runs))
                    continue
                for region in op["regions"]:
                    search(region, scope, runs * trip)
            else:
                for region in op["regions"]:
                    search(region, scope, runs)

    search(functions["main"], {}, 1)
    return _summary(found)


def _times(counts: Counter, trip) -> Counter:
    return Counter({k: v * (trip or 1) for k, v in counts.items()})


def _largest(branches) -> Counter:
    return max(branches, key=lambda c: c.total(), default=Counter())


def _summary(found) -> dict:
    kinds = sum((c for c, _ in found), Counter())
    return {
        "per_step": kinds.total(),
        "loops": len(found),
        "runs": sum(r for _, r in found),
        "kinds": dict(kinds.most_common()),
    }


# --------------------------------------------------------------------------------------------- optimised HLO


def parse_hlo(text: str) -> tuple[dict, str]:
    """``({computation name: [instruction line, ...]}, entry computation's name)`` of HLO module text."""
    computations, entry, current = {}, None, None
    for raw in text.splitlines():
        line = raw.strip()
        header = re.match(r"^(ENTRY )?%?([\w.\-]+) \(.*\{$", line)
        if header and current is None:
            current = header.group(2)
            computations[current] = []
            entry = current if header.group(1) else entry
        elif line == "}" and current is not None:
            current = None
        elif current is not None and line:
            computations[current].append(line)
    return computations, entry


def _opcode(line: str) -> str:
    """An HLO instruction's opcode: the word before its operands, after its result's shape."""
    rest = line.split(" = ", 1)[1]
    if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for i, c in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 0:
                rest = rest[i + 1 :]
                break
    else:
        rest = rest.split(" ", 1)[1]
    return re.match(r"\s*([\w\-]+)\(", rest).group(1)


def _called(line: str, attribute: str) -> list:
    m = re.search(attribute + r"=\{?([^}]*?)\}?(?:,|$)", line) if attribute == "branch_computations" else None
    if m:
        return [name.strip().lstrip("%") for name in m.group(1).split(",")]
    m = re.search(attribute + r"=%?([\w.\-]+)", line)
    return [m.group(1)] if m else []


def _branches(line: str) -> list:
    return _called(line, "branch_computations") or _called(line, "true_computation") + _called(
        line, "false_computation"
    )


def _kind(line: str) -> str:
    """An instruction's kind: its name without the number (``%loop_add_fusion.3`` -> ``loop_add_fusion``)."""
    return re.match(r"^(?:ROOT )?%?([\w\-]+?)(?:\.\d+)*(?:\.clone)*(?:\.\d+)* = ", line).group(1)


def _hlo_trip(line: str) -> int | None:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
    return int(m.group(1)) if m else None


def hlo_thunks(text: str, inner_steps: int) -> dict:
    """Instructions per inner step of the optimised HLO ``text`` (module docstring)."""
    computations, entry = parse_hlo(text)
    cache = {}

    def count(name) -> Counter:
        if name in cache:
            return cache[name]
        total = Counter()
        for line in computations[name]:
            op = _opcode(line)
            if op in HLO_FREE:
                continue
            if op == "call":
                total += sum((count(c) for c in _called(line, "to_apply")), Counter())
            elif op == "while":
                iteration = count(_called(line, "condition")[0]) + count(_called(line, "body")[0])
                total += _times(iteration, _hlo_trip(line))
            elif op == "conditional":
                total += Counter({op: 1}) + _largest(count(b) for b in _branches(line))
            else:
                total[_kind(line)] += 1
        cache[name] = total
        return total

    found = []

    def search(name, runs):
        for line in computations[name]:
            op = _opcode(line)
            if op == "call":
                for c in _called(line, "to_apply"):
                    search(c, runs)
            elif op == "while":
                cond, body = _called(line, "condition")[0], _called(line, "body")[0]
                trip = _hlo_trip(line) or 1
                if trip == inner_steps:
                    found.append((count(cond) + count(body), runs))
                else:
                    search(body, runs * trip)
            elif op == "conditional":
                for b in _branches(line):
                    search(b, runs)

    search(entry, 1)
    return _summary(found)


def count_lowered(lowered, inner_steps: int) -> dict:
    """Both counts of a ``jax.stages.Lowered`` step: ``{"ops": ..., "fusions": ...}`` (each :func:`stablehlo_ops`
    / :func:`hlo_thunks`' dict), compiling it for the optimised program."""
    ops = stablehlo_ops(lowered.as_text(), inner_steps)
    fusions = hlo_thunks(lowered.compile().as_text(), inner_steps)
    return {"inner_steps": inner_steps, "ops": ops, "fusions": fusions}


if __name__ == "__main__":  # python tools/hlo_count.py program.mlir|program.hlo INNER_STEPS
    import sys

    path, steps = sys.argv[1], int(sys.argv[2])
    text = open(path).read()
    print(json.dumps((hlo_thunks if "HloModule" in text[:200] else stablehlo_ops)(text, steps)))
