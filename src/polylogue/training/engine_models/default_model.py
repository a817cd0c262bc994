"""Train the shipped turn-taking model: ``polylogue train-default --data-root DIR --out DIR``.

Recipe (every step is deterministic given the seed):

1. Build one benchmark per corpus with the builder (natural class ratios, conversation-grouped
   80/10/10 splits), or reuse already-built benchmark folders.
2. Fit the turn-yield model (hashed words of an utterance -> "the next utterance is someone
   else's") on train conversations. Train features use 2-fold cross-fitted scores so the
   boosted trees never see a score fitted on the same conversation.
3. Fit gradient-boosted trees (LightGBM) on train points for P(take the floor); the validation
   split picks the number of trees (early stopping), fits isotonic calibration and chooses the
   threshold that maximises mean balanced accuracy across corpora, and one threshold per
   deployment domain (meeting, tv, earnings, chat) on that domain's corpora.
4. Fit a second booster on the same features for P(backchannel) (benchmark v2 outcome
   BACKCHANNEL vs the rest), calibrated on validation; its suggestion threshold maximises the
   backchannel F1 on validation. P(silent) is what remains.
5. Score the test split once, only to report (written into ``model.json``).
"""

from __future__ import annotations

import itertools
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import FEATURE_NAMES
from polylogue.engine.model import (
    DOMAINS,
    Calibration,
    HashedLogistic,
    TurnTakingModel,
    domain_of_corpus,
    feature_names,
)
from polylogue.engine.text import HASH_SIZE, text_facts
from polylogue.engine.trees import TreeEnsemble
from polylogue.evaluation.metrics import (
    balanced_accuracy_binary,
    best_mean_balanced_accuracy_threshold,
    expected_calibration_error,
)
from polylogue.training.engine_models.operating_points import ScoredSplit, choose_operating_points
from polylogue.turntaking.dataset import Benchmark
from polylogue.turntaking.types import CATEGORIES, Decision, DecisionPoint, Outcome

#: The chat corpus Molweni (9k points) is in the mix; Ubuntu IRC (1.6M points) is not: its
#: size would dominate training time and it is only used for measuring.
CORPORA: tuple[str, ...] = ("ami", "friends", "earnings21", "icsi", "molweni")


@dataclass(frozen=True)
class TrainOptions:
    seed: int = 13
    num_boost_round: int = 800
    early_stopping_rounds: int = 60
    learning_rate: float = 0.05
    num_leaves: int = 63
    min_data_in_leaf: int = 200
    feature_fraction: float = 0.8
    bagging_fraction: float = 0.8
    lambda_l2: float = 1.0
    #: The backchannel booster: rarer positives (2-4% of points), so fewer, smaller trees.
    backchannel_rounds: int = 400
    backchannel_learning_rate: float = 0.08
    backchannel_num_leaves: int = 31
    #: L2 strength of the turn-yield logistic model (sklearn's inverse C).
    yield_c: float = 0.5
    #: L2 strength of the relation word model.
    relation_c: float = 0.2
    #: Each corpus's total training weight is proportional to n**corpus_weight_power
    #: (0: every corpus counts the same, 1: every point counts the same).
    corpus_weight_power: float = 0.5
    threads: int = 2
    #: Extra feature blocks after the default features (``("chat",)``: the chat-domain model).
    feature_blocks: tuple[str, ...] = ()
    #: Weight SPEAK and SILENT equally within each corpus for the floor booster and its
    #: calibration (see _weights): P(take floor) is then calibrated to a balanced prior.
    balance_classes: bool = False


@dataclass
class SplitData:
    points: list[DecisionPoint]
    x: np.ndarray
    y: np.ndarray
    corpus: np.ndarray
    #: 1 where the gold outcome is BACKCHANNEL (empty when not given).
    backchannel: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    #: Hashed relation vocabulary of each row (input to the relation word model).
    relation_keys: list[tuple[int, ...]] = field(default_factory=list)


@dataclass
class TrainResult:
    model: TurnTakingModel
    metrics: dict[str, Any] = field(default_factory=dict)


def _fold(group: str) -> int:
    return zlib.crc32(group.encode("utf-8")) & 1


# ----------------------------------------------------------------------------- turn-yield model


def _yield_rows(
    benches: Sequence[Benchmark], conv_ids: set[str]
) -> tuple[list[tuple[int, ...]], list[int], list[str]]:
    rows: list[tuple[int, ...]] = []
    labels: list[int] = []
    groups: list[str] = []
    for b in benches:
        for cid, conv in b.conversations.items():
            if cid not in conv_ids:
                continue
            utts = conv.utterances
            for u, nxt in itertools.pairwise(utts):
                rows.append(text_facts(u.text).hashed)
                labels.append(int(nxt.speaker != u.speaker))
                groups.append(conv.group_id)
    return rows, labels, groups


def fit_hashed_logistic(
    rows: Sequence[tuple[int, ...]], labels: Sequence[int], c: float, seed: int = 13
) -> HashedLogistic:
    """L2 logistic regression on hashed vocabulary; the "bias" key carries the intercept."""
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import LogisticRegression

    if len(set(labels)) < 2:
        return HashedLogistic.zeros()
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.fromiter((i for r in rows for i in r), dtype=np.int32, count=int(indptr[-1]))
    data = np.ones(len(indices), dtype=np.float32)
    x = csr_matrix((data, indices, indptr), shape=(len(rows), HASH_SIZE))
    # liblinear shuffles the data: a fixed seed makes the weights reproducible.
    lr = LogisticRegression(
        C=c, fit_intercept=False, solver="liblinear", max_iter=200, random_state=seed
    )
    lr.fit(x, np.asarray(labels))
    return HashedLogistic(lr.coef_[0].astype(np.float32))


# ----------------------------------------------------------------------------- features


def split_data(
    benches: Sequence[Benchmark],
    split: str,
    scorer_for_group: Callable[[str], HashedLogistic],
    feature_blocks: tuple[str, ...] = (),
) -> SplitData:
    """Features for every point of ``split`` in every benchmark (one streaming pass each).

    The ``relation_logit`` column is left at 0 here and filled by :func:`set_relation_logits`
    once the relation word model is fitted (it is trained on these very rows).
    """
    xs: list[np.ndarray] = []
    ys, bs, cs, pts = [], [], [], []
    keys: list[tuple[int, ...]] = []
    extractors: dict[int, FeatureExtractor] = {}
    no_relation = HashedLogistic.zeros()
    for b in benches:
        if split not in b.splits:
            continue
        points = b.points(split)
        # One batch per cross-fitted scorer: the extractor then orders each batch by
        # conversation itself (a per-sample split lists points in no conversation order).
        rows_of: dict[int, list[int]] = {}
        for i, p in enumerate(points):
            scorer = scorer_for_group(p.group)
            extractors.setdefault(
                id(scorer), FeatureExtractor(scorer, no_relation, blocks=feature_blocks)
            )
            rows_of.setdefault(id(scorer), []).append(i)
        x_bench: np.ndarray | None = None
        bench_keys: list[tuple[int, ...]] = [()] * len(points)
        for scorer_id, rows in rows_of.items():
            batch_keys: list[tuple[int, ...]] = []
            x_batch = extractors[scorer_id].features([points[i].input for i in rows], batch_keys)
            if x_bench is None:
                x_bench = np.empty((len(points), x_batch.shape[1]), dtype=np.float32)
            x_bench[rows] = x_batch
            for i, k in zip(rows, batch_keys, strict=True):
                bench_keys[i] = k
        if x_bench is not None:
            xs.append(x_bench)
        keys.extend(bench_keys)
        for p in points:
            ys.append(p.gold.label is Decision.SPEAK)
            bs.append(p.gold.floor_outcome is Outcome.BACKCHANNEL)
            cs.append(p.input.corpus)
        pts.extend(points)
    x = np.vstack(xs) if xs else np.empty((0, 0), dtype=np.float32)
    return SplitData(
        pts,
        x,
        np.asarray(ys, dtype=np.int8),
        np.asarray(cs),
        np.asarray(bs, dtype=np.int8),
        keys,
    )


def set_relation_logits(data: SplitData, scorer_for_row: Callable[[int], HashedLogistic]) -> None:
    """Fill the ``relation_logit`` column exactly as the engine computes it at a pause."""
    col = FEATURE_NAMES.index("relation_logit")
    for i, k in enumerate(data.relation_keys):
        data.x[i, col] = scorer_for_row(i)(k)


# ----------------------------------------------------------------------------- metrics


def size_stratum(n_present: int) -> str:
    if n_present <= 2:
        return "2"
    if n_present == 3:
        return "3"
    if n_present == 4:
        return "4"
    if n_present <= 6:
        return "5-6"
    return "7+"


def metric_table(data: SplitData, p: np.ndarray, threshold: float) -> dict[str, Any]:
    """Balanced accuracy, per-category accuracy and ECE per corpus and per size stratum."""
    pred = (p >= threshold).astype(np.int8)
    cats = np.asarray([pt.gold.category.value for pt in data.points])
    sizes = np.asarray([size_stratum(len(pt.input.present)) for pt in data.points])

    def block(m: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": int(m.sum()),
            "speak_rate": float(data.y[m].mean()) if m.any() else None,
            "balanced_accuracy": balanced_accuracy_binary(data.y[m], pred[m]) if m.any() else None,
            "ece": expected_calibration_error(data.y[m], p[m]) if m.any() else None,
        }
        for c in (cat.value for cat in CATEGORIES):
            mc = m & (cats == c)
            out[f"acc_{c}"] = float((pred[mc] == data.y[mc]).mean()) if mc.any() else None
            out[f"n_{c}"] = int(mc.sum())
        return out

    table: dict[str, Any] = {"all": block(np.ones(len(pred), dtype=bool)), "corpora": {}}
    for corpus in sorted(set(data.corpus.tolist())):
        mc = data.corpus == corpus
        entry = block(mc)
        entry["sizes"] = {s: block(mc & (sizes == s)) for s in sorted(set(sizes[mc].tolist()))}
        table["corpora"][corpus] = entry
    return table


def choose_threshold(data: SplitData, p: np.ndarray) -> float:
    """The threshold maximising the mean over corpora of balanced accuracy."""
    return best_mean_balanced_accuracy_threshold(data.y, p, data.corpus)


def choose_domain_thresholds(data: SplitData, p: np.ndarray) -> dict[str, float]:
    """Per deployment domain, the threshold maximising mean balanced accuracy of its corpora."""
    domains = np.asarray([domain_of_corpus(c) or "" for c in data.corpus.tolist()])
    out: dict[str, float] = {}
    for domain in DOMAINS:
        m = domains == domain
        if m.any() and len(set(data.y[m].tolist())) == 2:
            out[domain] = best_mean_balanced_accuracy_threshold(data.y[m], p[m], data.corpus[m])
    return out


def best_f1_threshold(y: np.ndarray, p: np.ndarray) -> float:
    """The threshold (on a 0.01 grid) maximising F1 of the positive class."""
    best, best_f1 = 1.0, -1.0
    for t in np.round(np.arange(0.01, 1.0, 0.01), 2):
        pred = p >= t
        tp = float((pred & (y == 1)).sum())
        f1 = 2 * tp / max(float(pred.sum() + (y == 1).sum()), 1.0)
        if f1 > best_f1:
            best, best_f1 = float(t), f1
    return best


def outcome_table(data: SplitData, p_back: np.ndarray, threshold: float) -> dict[str, Any]:
    """Backchannel detection per corpus: rate, precision, recall, F1 at ``threshold``."""
    out: dict[str, Any] = {}
    pred = p_back >= threshold
    for corpus in sorted(set(data.corpus.tolist())):
        m = data.corpus == corpus
        y = data.backchannel[m] == 1
        tp = float((pred[m] & y).sum())
        out[corpus] = {
            "n": int(m.sum()),
            "backchannel_rate": float(y.mean()),
            "precision": tp / float(pred[m].sum()) if pred[m].any() else None,
            "recall": tp / float(y.sum()) if y.any() else None,
            "f1": 2 * tp / max(float(pred[m].sum() + y.sum()), 1.0) if y.any() else None,
        }
    return out


# ----------------------------------------------------------------------------- training


def _weights(
    corpus: np.ndarray, power: float, y: np.ndarray | None = None, balance: bool = False
) -> np.ndarray:
    """Row weights: each corpus's total weight is proportional to n**power.

    ``balance``: within each corpus, SPEAK and SILENT rows get equal total weight, so a
    balanced-accuracy threshold is about the same for corpora with very different SPEAK rates
    (IRC 8%, Molweni 31%) and one threshold serves them all.
    """
    w = np.ones(len(corpus), dtype=np.float64)
    names, counts = np.unique(corpus, return_counts=True)
    for name, n in zip(names, counts, strict=True):
        m = corpus == name
        w[m] = n ** (power - 1.0)
        if balance and y is not None:
            for label in (0, 1):
                mc = m & (y == label)
                if mc.any():
                    w[mc] *= 0.5 * n / mc.sum()
    return w * len(w) / w.sum()


def train_default_model(
    benches: Sequence[Benchmark],
    options: TrainOptions | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Fit the full recipe on built benchmarks; returns the model with validation/test metrics."""
    from sklearn.isotonic import IsotonicRegression

    from polylogue.extras import require_extra

    # Fail before the minutes of feature work, not at the first boosting round.
    require_extra("train", "lightgbm", what="train_default_model")

    opts = options or TrainOptions()
    t0 = time.perf_counter()
    train_convs = {p.input.conversation_id for b in benches for p in b.points("train")}
    rows, labels, groups = _yield_rows(benches, train_convs)
    folds = np.asarray([_fold(g) for g in groups])
    full_yield = fit_hashed_logistic(rows, labels, opts.yield_c, opts.seed)
    fold_yield = {
        k: fit_hashed_logistic(
            [r for r, f in zip(rows, folds, strict=True) if f != k],
            [y for y, f in zip(labels, folds, strict=True) if f != k],
            opts.yield_c,
            opts.seed,
        )
        for k in (0, 1)
    }
    log(f"turn-yield model on {len(rows):,} utterances ({time.perf_counter() - t0:.0f}s)")

    blocks = opts.feature_blocks
    names = list(feature_names(blocks))
    train = split_data(benches, "train", lambda g: fold_yield[_fold(g)], blocks)
    val = split_data(benches, "validation", lambda g: full_yield, blocks)
    test = split_data(benches, "test", lambda g: full_yield, blocks)
    log(
        f"features: train {len(train.y):,}  validation {len(val.y):,}  test {len(test.y):,} "
        f"({time.perf_counter() - t0:.0f}s)"
    )
    if len(train.y) == 0 or len(val.y) == 0:
        raise ValueError("training needs points in both the train and the validation split")

    # Relation word model: cross-fitted on train (by conversation group) like turn-yield.
    train_folds = np.asarray([_fold(p.group) for p in train.points])
    ytr = train.y.tolist()
    full_relation = fit_hashed_logistic(train.relation_keys, ytr, opts.relation_c, opts.seed)
    fold_relation = {
        k: fit_hashed_logistic(
            [r for r, f in zip(train.relation_keys, train_folds, strict=True) if f != k],
            [y for y, f in zip(ytr, train_folds, strict=True) if f != k],
            opts.relation_c,
            opts.seed,
        )
        for k in (0, 1)
    }
    set_relation_logits(train, lambda i: fold_relation[int(train_folds[i])])
    set_relation_logits(val, lambda i: full_relation)
    set_relation_logits(test, lambda i: full_relation)
    log(f"relation word model ({time.perf_counter() - t0:.0f}s)")

    params = {
        "objective": "binary",
        "learning_rate": opts.learning_rate,
        "num_leaves": opts.num_leaves,
        "min_data_in_leaf": opts.min_data_in_leaf,
        "feature_fraction": opts.feature_fraction,
        "bagging_fraction": opts.bagging_fraction,
        "bagging_freq": 1,
        "lambda_l2": opts.lambda_l2,
        "seed": opts.seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": opts.threads,
        "verbosity": -1,
    }
    booster, rounds = _boost(
        params,
        (
            train.x,
            train.y,
            _weights(train.corpus, opts.corpus_weight_power, train.y, opts.balance_classes),
        ),
        (val.x, val.y, _weights(val.corpus, opts.corpus_weight_power, val.y, opts.balance_classes)),
        names,
        opts.num_boost_round,
        opts.early_stopping_rounds,
    )
    log(f"boosted {rounds} trees ({time.perf_counter() - t0:.0f}s)")
    trees = TreeEnsemble.from_lightgbm(booster)
    sample = val.x[:2000]
    gap = float(np.abs(trees.predict(sample) - booster.predict(sample)).max())
    if gap > 1e-9:
        raise AssertionError(f"numpy trees disagree with LightGBM by {gap:.2e}")

    raw_val = np.asarray(booster.predict(val.x, num_threads=opts.threads), dtype=np.float64)
    # With balanced classes the calibration targets the same balanced prior (each corpus's
    # SPEAK and SILENT weighted equally), so one threshold on a fine grid serves every corpus;
    # calibrating such a model to the natural rates squeezes low-rate corpora into a few steps.
    cal_weight = (
        _weights(val.corpus, opts.corpus_weight_power, val.y, balance=True)
        if opts.balance_classes
        else None
    )
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(
        raw_val, val.y, sample_weight=cal_weight
    )
    calibration = Calibration(
        tuple(float(v) for v in iso.X_thresholds_), tuple(float(v) for v in iso.y_thresholds_)
    )
    p_val = np.clip(calibration(raw_val), 0.0, 1.0)
    threshold = choose_threshold(val, p_val)
    domain_thresholds = choose_domain_thresholds(val, p_val)
    log(f"domain thresholds {domain_thresholds}")

    back = _fit_backchannel(train, val, p_val, params, opts, log)
    back_trees, back_calibration, back_threshold, bbooster = back
    pb_val = _backchannel_proba(bbooster, back_calibration, val.x, p_val, opts.threads)
    log(f"backchannel booster ({time.perf_counter() - t0:.0f}s)")
    operating_points = choose_operating_points(
        ScoredSplit(
            np.asarray(val.corpus), val.y == 1, val.backchannel == 1, p_val, np.asarray(pb_val)
        )
    )
    log(f"operating points {operating_points}")

    metrics: dict[str, Any] = {
        "validation": metric_table(val, p_val, threshold),
        "validation_backchannel": outcome_table(val, pb_val, back_threshold),
    }
    if len(test.y):
        raw_test = np.asarray(booster.predict(test.x, num_threads=opts.threads), dtype=np.float64)
        p_test = np.clip(calibration(raw_test), 0.0, 1.0)
        metrics["test"] = metric_table(test, p_test, threshold)
        pb_test = _backchannel_proba(bbooster, back_calibration, test.x, p_test, opts.threads)
        metrics["test_backchannel"] = outcome_table(test, pb_test, back_threshold)
    importance = dict(zip(names, booster.feature_importance("gain").tolist(), strict=True))
    meta = {
        "trained_on": {
            b.name: {
                "data_hash": b.data_hash,
                "corpora": b.manifest.get("corpora"),
                # So `eval`/`report` can tell when a test split holds training conversations.
                "train_conversations": sorted(b.conversation_ids("train")),
            }
            for b in benches
        },
        "options": opts.__dict__,
        "trees": booster.num_trees(),
        "yield_utterances": len(rows),
        "train_points": len(train.y),
        "metrics": metrics,
        "feature_importance_gain": dict(sorted(importance.items(), key=lambda kv: -kv[1])),
        "train_seconds": round(time.perf_counter() - t0, 1),
    }
    meta["backchannel_trees"] = 0 if bbooster is None else bbooster.num_trees()
    model = TurnTakingModel(
        trees,
        full_yield,
        full_relation,
        calibration,
        threshold,
        meta,
        backchannel_trees=back_trees,
        backchannel_calibration=back_calibration,
        backchannel_threshold=back_threshold,
        domain_thresholds=domain_thresholds,
        feature_blocks=blocks,
        operating_points=operating_points,
    )
    log(
        f"threshold {threshold:.2f}, backchannel {back_threshold:.2f}; "
        f"done in {time.perf_counter() - t0:.0f}s"
    )
    return TrainResult(model, metrics)


def _boost(
    params: dict[str, Any],
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    val: tuple[np.ndarray, np.ndarray, np.ndarray],
    names: list[str],
    max_rounds: int,
    early_stopping_rounds: int,
) -> tuple[Any, int]:
    """A LightGBM booster on (x, y, weight) with early stopping on validation, and its rounds.

    Only the trees early stopping chose are kept, so the saved model is what was validated.
    """
    import lightgbm as lgb

    dtrain = lgb.Dataset(
        train[0], train[1], weight=train[2], feature_name=names, free_raw_data=False
    )
    dval = lgb.Dataset(val[0], val[1], weight=val[2], reference=dtrain)
    booster = lgb.train(
        params,
        dtrain,
        num_boost_round=max_rounds,
        valid_sets=[dval],
        callbacks=[lgb.early_stopping(early_stopping_rounds, verbose=False)],
    )
    best = int(booster.best_iteration)
    return lgb.Booster(model_str=booster.model_to_string(num_iteration=best)), best


def _backchannel_proba(
    booster: Any, calibration: Calibration, x: np.ndarray, p_floor: np.ndarray, threads: int
) -> np.ndarray:
    if booster is None:
        return np.zeros(len(x))
    raw = np.asarray(booster.predict(x, num_threads=threads), dtype=np.float64)
    return np.minimum(np.clip(calibration(raw), 0.0, 1.0), 1.0 - p_floor)


def _fit_backchannel(
    train: SplitData,
    val: SplitData,
    p_val: np.ndarray,
    params: dict[str, Any],
    opts: TrainOptions,
    log: Callable[[str], None],
) -> tuple[TreeEnsemble | None, Calibration, float, Any]:
    """The backchannel booster (BACKCHANNEL vs the rest), its calibration and threshold.

    Without backchannels in train and validation (untimed corpora only) there is nothing to
    learn: no booster, P(backchannel) = 0.
    """
    from sklearn.isotonic import IsotonicRegression

    if not train.backchannel.any() or not val.backchannel.any():
        log("no BACKCHANNEL outcomes in train or validation: no backchannel booster")
        return None, Calibration((), ()), 1.0, None
    bparams = {
        **params,
        "learning_rate": opts.backchannel_learning_rate,
        "num_leaves": opts.backchannel_num_leaves,
    }
    booster, _ = _boost(
        bparams,
        (train.x, train.backchannel, _weights(train.corpus, opts.corpus_weight_power)),
        (val.x, val.backchannel, _weights(val.corpus, opts.corpus_weight_power)),
        list(feature_names(opts.feature_blocks)),
        opts.backchannel_rounds,
        opts.early_stopping_rounds,
    )
    raw = np.asarray(booster.predict(val.x, num_threads=opts.threads), dtype=np.float64)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(raw, val.backchannel)
    calibration = Calibration(
        tuple(float(v) for v in iso.X_thresholds_), tuple(float(v) for v in iso.y_thresholds_)
    )
    pb = np.minimum(np.clip(calibration(raw), 0.0, 1.0), 1.0 - p_val)
    return (
        TreeEnsemble.from_lightgbm(booster),
        calibration,
        best_f1_threshold(val.backchannel, pb),
        booster,
    )


def build_benchmarks(
    data_root: Path | None,
    work_dir: Path,
    corpora: Sequence[str] = CORPORA,
    limit_conversations: int | None = None,
    seed: int = 13,
    log: Callable[[str], None] = print,
) -> list[Benchmark]:
    """Build (or reuse, when already built in ``work_dir``) one benchmark folder per corpus."""
    import functools

    from polylogue.corpora import CORPORA, load_corpus
    from polylogue.turntaking.dataset import (
        BenchmarkBuild,
        BuildOptions,
        build_benchmark,
        load_or_build,
        reader_options,
    )

    def make(name: str) -> BenchmarkBuild:
        root = None if data_root is None else data_root / CORPORA[name].folder
        # The benchmark's own reader options (AMI: acts split at word gaps, v2).
        convs = load_corpus(name, root, **reader_options(name))
        if limit_conversations is not None:
            convs = itertools.islice(convs, limit_conversations)
        return build_benchmark(convs, BuildOptions(seed=seed))

    return [
        load_or_build(work_dir / f"bench-{name}", functools.partial(make, name), log)
        for name in corpora
    ]
