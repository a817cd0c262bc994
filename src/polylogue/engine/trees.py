"""Boosted trees evaluated with numpy alone, from arrays in a ``.npz`` file we control.

Training uses LightGBM; the shipped model does not need it. Importing LightGBM pulls in
scikit-learn and pandas (1-2 s on a small CPU), which alone would break the "loads in under a
second" target, while walking ~800 small trees for one row is a few vectorised numpy steps.

Split semantics follow LightGBM's numerical decision exactly: with missing type NaN a NaN goes
the default way; with missing type None a NaN counts as 0.0; with missing type Zero a zero (or
NaN) goes the default way; otherwise ``x <= threshold`` goes left.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2
_ZERO = 1e-35


@dataclass(frozen=True)
class TreeEnsemble:
    """All trees flattened into one node table; a leaf points to itself."""

    feature: np.ndarray  # int32, -1 at leaves
    threshold: np.ndarray  # float64
    left: np.ndarray  # int32 node index
    right: np.ndarray  # int32 node index
    default_left: np.ndarray  # bool
    missing: np.ndarray  # int8: 0 none, 1 zero, 2 nan
    value: np.ndarray  # float64: leaf value, or the internal node's expected value
    roots: np.ndarray  # int32, one per tree
    depth: int

    @property
    def num_trees(self) -> int:
        return len(self.roots)

    def _step(self, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
        feat = self.feature[nodes]
        internal = feat >= 0
        v = (
            x[..., np.maximum(feat, 0)]
            if x.ndim == 1
            else np.take_along_axis(x, np.maximum(feat, 0), axis=1)
        )
        v = v.astype(np.float64)
        miss = self.missing[nodes]
        nan = np.isnan(v)
        v = np.where(nan & (miss != _MISSING_NAN), 0.0, v)
        to_default = ((miss == _MISSING_ZERO) & (np.abs(v) <= _ZERO)) | (
            (miss == _MISSING_NAN) & nan
        )
        go_left = np.where(to_default, self.default_left[nodes], v <= self.threshold[nodes])
        nxt = np.where(go_left, self.left[nodes], self.right[nodes])
        return np.where(internal, nxt, nodes)

    def raw_score(self, x: np.ndarray) -> np.ndarray:
        """Sum of leaf values (log-odds) for each row of ``x`` (shape (n, features))."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float32))
        if len(x) == 1:  # the live path: one pause, one target
            return np.asarray([self.leaf_values(x[0]).sum()])
        out = np.empty(len(x), dtype=np.float64)
        for start in range(0, len(x), 2048):  # bounded memory: rows x trees node indices
            chunk = x[start : start + 2048]
            nodes = np.broadcast_to(self.roots, (len(chunk), len(self.roots))).copy()
            for _ in range(self.depth):
                nodes = self._step(nodes, chunk)
            out[start : start + len(chunk)] = self.value[nodes].sum(axis=1)
        return out

    def _leaves(self, row: np.ndarray) -> np.ndarray:
        """Leaf of every tree for one row (node ids of this table, in ``roots`` order)."""
        walker = self._row_walker
        return walker.node_ids[walker.leaves(row)]

    def _leaves_by_level(self, row: np.ndarray) -> np.ndarray:
        """The reference walk (one vectorised step per tree level), kept to test the fast one."""
        nodes = self.roots
        for _ in range(self.depth):
            if (self.feature[nodes] < 0).all():
                break
            nodes = self._step(nodes, row)
        return nodes

    @cached_property
    def _row_walker(self) -> _RowWalker:
        return _RowWalker.build(self)

    def prepare_row_scoring(self) -> None:
        """Build the one-row scoring table now (otherwise the first one-row call builds it)."""
        _ = self._row_walker

    def predict(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.raw_score(x)))

    def stacked(self, other: TreeEnsemble) -> TreeEnsemble:
        """Both ensembles in one node table (``self``'s trees first), so one walk scores both.

        At a pause the walk's cost is a fixed number of numpy steps per tree level, whatever the
        number of trees: walking two ensembles together costs about as much as walking one.
        """
        off = len(self.feature)
        return TreeEnsemble(
            feature=np.concatenate([self.feature, other.feature]),
            threshold=np.concatenate([self.threshold, other.threshold]),
            left=np.concatenate([self.left, other.left + off]).astype(np.int32),
            right=np.concatenate([self.right, other.right + off]).astype(np.int32),
            default_left=np.concatenate([self.default_left, other.default_left]),
            missing=np.concatenate([self.missing, other.missing]),
            value=np.concatenate([self.value, other.value]),
            roots=np.concatenate([self.roots, other.roots + off]).astype(np.int32),
            depth=max(self.depth, other.depth),
        )

    def leaf_values(self, row: np.ndarray) -> np.ndarray:
        """Leaf value of every tree for one row (in ``roots`` order)."""
        walker = self._row_walker
        return walker.value[walker.leaves(np.asarray(row, dtype=np.float32).reshape(-1))]

    def contributions(self, x: np.ndarray, trees: int | None = None) -> np.ndarray:
        """Path attributions of one row: the change of expected value at each split, summed
        per split feature (Saabas). Returns (features + 1,), the last entry being the bias.

        ``trees``: attribute only the first this many trees (one ensemble of a stacked table).
        """
        row = np.asarray(x, dtype=np.float32).reshape(-1)
        return self._row_walker.contributions(row, trees)

    def _contributions_by_level(self, x: np.ndarray) -> np.ndarray:
        """The reference for :meth:`contributions` (level-by-level walk), kept for tests."""
        row = np.asarray(x, dtype=np.float32).reshape(-1)
        out = np.zeros(len(row) + 1, dtype=np.float64)
        nodes = self.roots.copy()
        out[-1] = float(self.value[nodes].sum())
        for _ in range(self.depth):
            nxt = self._step(nodes, row)
            moved = nxt != nodes
            np.add.at(
                out, self.feature[nodes[moved]], self.value[nxt[moved]] - self.value[nodes[moved]]
            )
            nodes = nxt
        return out

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> None:
        np.savez_compressed(
            path,
            feature=self.feature,
            threshold=self.threshold,
            left=self.left,
            right=self.right,
            default_left=self.default_left,
            missing=self.missing,
            value=self.value,
            roots=self.roots,
            depth=np.asarray([self.depth], dtype=np.int32),
        )

    @classmethod
    def load(cls, path: str | Path) -> TreeEnsemble:
        with np.load(path, allow_pickle=False) as z:
            return cls(
                feature=z["feature"],
                threshold=z["threshold"],
                left=z["left"],
                right=z["right"],
                default_left=z["default_left"],
                missing=z["missing"],
                value=z["value"],
                roots=z["roots"],
                depth=int(z["depth"][0]),
            )

    @classmethod
    def from_lightgbm(cls, booster: Any) -> TreeEnsemble:
        """Flatten a trained LightGBM binary booster (numerical splits only)."""
        dump = booster.dump_model()
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        default_left: list[bool] = []
        missing: list[int] = []
        value: list[float] = []
        roots: list[int] = []
        max_depth = 0

        def add(node: dict[str, Any], depth: int) -> int:
            nonlocal max_depth
            max_depth = max(max_depth, depth)
            i = len(feature)
            feature.append(-1)
            threshold.append(0.0)
            left.append(i)
            right.append(i)
            default_left.append(False)
            missing.append(_MISSING_NONE)
            if "leaf_value" in node:
                value.append(float(node["leaf_value"]))
                return i
            if node.get("decision_type", "<=") != "<=":
                raise ValueError(f"unsupported split {node.get('decision_type')!r} (categorical?)")
            value.append(float(node.get("internal_value", 0.0)))
            feature[i] = int(node["split_feature"])
            threshold[i] = float(node["threshold"])
            default_left[i] = bool(node["default_left"])
            missing[i] = {"None": _MISSING_NONE, "Zero": _MISSING_ZERO, "NaN": _MISSING_NAN}[
                node["missing_type"]
            ]
            left[i] = add(node["left_child"], depth + 1)
            right[i] = add(node["right_child"], depth + 1)
            return i

        for tree in dump["tree_info"]:
            roots.append(add(tree["tree_structure"], 0))
        return cls(
            feature=np.asarray(feature, dtype=np.int32),
            threshold=np.asarray(threshold, dtype=np.float64),
            left=np.asarray(left, dtype=np.int32),
            right=np.asarray(right, dtype=np.int32),
            default_left=np.asarray(default_left, dtype=bool),
            missing=np.asarray(missing, dtype=np.int8),
            value=np.asarray(value, dtype=np.float64),
            roots=np.asarray(roots, dtype=np.int32),
            depth=max_depth,
        )


@dataclass(frozen=True)
class _RowWalker:
    """The node table renumbered to score one row fast (the live path: one pause, one target).

    Internal nodes come first, grouped by split feature, then the leaves. For a row, every
    internal node's direction is decided at once (a few numpy operations over all nodes,
    whatever the depth), giving a next-node table in which a leaf points to itself; the walk is
    then one gather per tree level. The level-by-level walk (``_leaves_by_level``) pays ~12 small
    numpy operations per level instead; both take exactly the same splits (``_step``'s rules),
    so the leaves are identical.
    """

    n_internal: int
    feature: np.ndarray  # intp, split feature per internal node (ascending)
    #: internal nodes per split feature (they are numbered feature by feature)
    counts: np.ndarray  # intp, (max split feature + 1,)
    #: the split threshold rounded down to float32: for a float32 value x (feature rows are
    #: float32), ``x <= t`` exactly when ``x <= t32``, and float32 halves the memory traffic
    threshold32: np.ndarray  # float32, per internal node
    #: node ids below are int32 where they fit (under 2**31 nodes): half the bytes per row
    right: np.ndarray  # new numbering, per internal node
    #: left child minus right child (the next node is ``right + go_left * to_left``)
    to_left: np.ndarray  # per internal node
    #: where a NaN goes at each internal node (None: as 0.0; NaN and Zero: the default way)
    nan_left: np.ndarray  # bool, per internal node
    #: the range of internal nodes that split on each feature (features some split uses)
    by_feature: dict[int, tuple[int, int]]
    #: internal nodes with missing type Zero (a zero goes the default way), and that way
    zero_nodes: np.ndarray  # intp
    zero_default_left: np.ndarray  # bool
    leaf_ids: np.ndarray  # n_internal .. n_nodes-1 (leaves point to themselves)
    roots: np.ndarray  # new numbering
    value: np.ndarray  # float64, new numbering
    #: original node id of each new id
    node_ids: np.ndarray  # intp
    depth: int

    @classmethod
    def build(cls, ens: TreeEnsemble) -> _RowWalker:
        internal = np.flatnonzero(ens.feature >= 0)
        internal = internal[np.argsort(ens.feature[internal], kind="stable")]
        leaves = np.flatnonzero(ens.feature < 0)
        node_ids = np.concatenate([internal, leaves]).astype(np.intp)
        new_id = np.empty(len(ens.feature), dtype=np.intp)
        new_id[node_ids] = np.arange(len(node_ids), dtype=np.intp)
        feature = ens.feature[internal].astype(np.intp)
        counts = np.bincount(feature, minlength=int(feature.max(initial=-1)) + 1)
        ends = np.cumsum(counts)
        threshold = ens.threshold[internal].astype(np.float64)
        missing = ens.missing[internal]
        default_left = ens.default_left[internal].astype(bool)
        zero_nodes = np.flatnonzero(missing == _MISSING_ZERO).astype(np.intp)
        left, right = new_id[ens.left[internal]], new_id[ens.right[internal]]
        ids = np.int32 if len(node_ids) < 2**31 else np.intp
        with np.errstate(over="ignore"):  # beyond float32's range: inf, stepped down below
            t32 = threshold.astype(np.float32)
        t32 = np.where(t32 > threshold, np.nextafter(t32, np.float32(-np.inf)), t32)
        return cls(
            n_internal=len(internal),
            feature=feature,
            counts=counts.astype(np.intp),
            threshold32=t32.astype(np.float32),
            right=right.astype(ids),
            to_left=(left - right).astype(ids),
            nan_left=np.where(missing == _MISSING_NONE, threshold >= 0.0, default_left),
            by_feature={
                f: (int(ends[f] - counts[f]), int(ends[f])) for f in np.flatnonzero(counts).tolist()
            },
            zero_nodes=zero_nodes,
            zero_default_left=default_left[zero_nodes],
            leaf_ids=np.arange(len(internal), len(node_ids), dtype=ids),
            roots=new_id[ens.roots].astype(ids),
            value=ens.value[node_ids].astype(np.float64),
            node_ids=node_ids,
            depth=ens.depth,
        )

    def next_table(self, row: np.ndarray) -> np.ndarray:
        """For ``row`` (float32, shape (features,)): the next node of every node (new ids)."""
        r = np.asarray(row[: len(self.counts)], dtype=np.float32)
        v = np.repeat(r, self.counts)  # each internal node's split value (nodes go by feature)
        go_left = v <= self.threshold32  # False wherever v is NaN: fixed just below
        nan = np.isnan(r)
        if nan.any():
            for f in np.flatnonzero(nan).tolist():
                span = self.by_feature.get(f)
                if span is not None:
                    go_left[span[0] : span[1]] = self.nan_left[span[0] : span[1]]
        if len(self.zero_nodes):
            vz = v[self.zero_nodes].astype(np.float64)
            hit = (np.abs(vz) <= _ZERO) | np.isnan(vz)
            go_left[self.zero_nodes[hit]] = self.zero_default_left[hit]
        n = self.n_internal
        step = np.empty(n + len(self.leaf_ids), dtype=self.right.dtype)
        np.multiply(go_left, self.to_left, out=step[:n])
        np.add(step[:n], self.right, out=step[:n])
        step[n:] = self.leaf_ids
        return step

    def leaves(self, row: np.ndarray) -> np.ndarray:
        """New ids of the leaf each tree sends ``row`` (float32, shape (features,)) to."""
        step = self.next_table(row)
        n = self.n_internal
        nodes = self.roots.copy()
        for level in range(self.depth):
            # Checking costs about as much as a step: look every fourth level.
            if level % 4 == 3 and (not len(nodes) or nodes.min() >= n):
                break
            step.take(nodes, out=nodes)
        return nodes

    def contributions(self, row: np.ndarray, trees: int | None = None) -> np.ndarray:
        """Saabas attributions (see ``TreeEnsemble.contributions``), summed in the same order."""
        step = self.next_table(row)
        out = np.zeros(len(row) + 1, dtype=np.float64)
        nodes = self.roots[:trees].copy()
        out[-1] = float(self.value[nodes].sum())
        for _ in range(self.depth):
            nxt = step.take(nodes)
            moved = nxt != nodes
            if not moved.any():
                break
            here = nodes[moved]
            np.add.at(out, self.feature[here], self.value[nxt[moved]] - self.value[here])
            nodes = nxt
        return out
