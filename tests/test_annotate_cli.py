"""`polylogue annotate` end to end (without a browser) and the app's access rules.

A study is created from a real Friends benchmark with the CLI; simulated annotators answer
through the HTTP API (FastAPI's TestClient), then agreement, adjudication, export and the
Table-4 scores are checked against independent computations.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from benches import friends_benchmark
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from polylogue.annotate.app import AccessError, check_binding, create_study_app, is_loopback
from polylogue.annotate.store import AnnotationStore
from polylogue.cli import app as cli
from polylogue.paths import corpus_dir

runner = CliRunner()
TOTAL = 4 * 6  # 4 per category (I1, I2, S1, S2, since v2 SA, since v2.1 S3)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return friends_benchmark(tmp_path_factory.mktemp("cli") / "friends", 60)


def _invoke(*args: str) -> Any:
    result = runner.invoke(cli, ["annotate", *args], catch_exceptions=False)
    return result


def _links(output: str) -> dict[str, str]:
    return {
        m[0]: m[2] for m in re.findall(r"^(\S+)\s+http://\S+/(a|adjudicate)/(\S+)$", output, re.M)
    }


def _gold(store: AnnotationStore, name: str) -> dict[str, str]:
    return {it.item_id: it.gold["answers"]["decision"] for it in store.items(store.study(name))}


@pytest.fixture(scope="module")
def answered(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A study answered by three simulated annotators through the HTTP API."""
    tmp = tmp_path_factory.mktemp("answered")
    db = tmp / "study.sqlite"
    res = _invoke(
        "create",
        "--db",
        str(db),
        "--study",
        "friends-h",
        "--benchmark",
        str(bench),
        "--split",
        "test",
        "--per-category",
        "4",
        "--seed",
        "3",
        "--annotators",
        "h1,h2,h3",
        "--adjudicator",
        "adj",
    )
    assert res.exit_code == 0, res.output
    keys = _links(res.stdout)
    assert set(keys) == {"h1", "h2", "h3", "adj"}
    store = AnnotationStore(db)
    gold = _gold(store, "friends-h")
    client = TestClient(create_study_app(store))
    # h1 follows gold, h2 always says SPEAK, h3 follows gold but flips every third item and
    # leaves one item open (a missing answer).
    answers: dict[str, dict[str, str]] = {"h1": {}, "h2": {}, "h3": {}}
    for name in answers:
        state = client.get(f"/api/a/{keys[name]}/state").json()
        assert state["progress"] == {"done": 0, "total": TOTAL, "next_position": 0}
        order = next(a.order for a in store.annotators(store.study("friends-h")) if a.name == name)
        # h3 leaves open a SILENT item, where h1 (gold) and h2 (SPEAK) disagree: a tie.
        skipped = next(i for i in order if gold[i] == "SILENT")
        for pos, item_id in enumerate(order):
            g = gold[item_id]
            if name == "h1":
                label = g
            elif name == "h2":
                label = "SPEAK"
            else:
                if item_id == skipped:
                    continue
                label = ("SILENT" if g == "SPEAK" else "SPEAK") if pos % 3 == 0 else g
            r = client.put(
                f"/api/a/{keys[name]}/items/{pos}/answers/decision",
                json={"label": label, "seconds": 1.5},
            )
            assert r.status_code == 200, r.text
            answers[name][item_id] = label
    return {
        "db": db,
        "keys": keys,
        "store": store,
        "gold": gold,
        "answers": answers,
        "tmp": tmp,
        "client": client,
    }


def test_api_refuses_bad_answers_and_hides_gold(answered: dict[str, Any]) -> None:
    client, keys = answered["client"], answered["keys"]
    base = f"/api/a/{keys['h1']}"
    assert (
        client.put(f"{base}/items/0/answers/decision", json={"label": "MAYBE"}).status_code == 422
    )
    assert client.put(f"{base}/items/0/answers/decision", json={}).status_code == 422
    assert (
        client.put(f"{base}/items/999/answers/decision", json={"label": "SPEAK"}).status_code == 404
    )
    assert client.get(f"{base}/items/-1").status_code == 404
    assert client.get("/api/a/wrong/state").status_code == 404
    item = client.get(f"{base}/items/0").json()
    assert set(item) == {"position", "total", "questions", "payload", "answers"}
    assert not {"gold", "category", "label"} & set(item["payload"])
    # The adjudicator API is closed to annotator keys, and vice versa.
    assert client.get(f"/api/adj/{keys['h1']}/queue").status_code == 404
    assert client.get(f"/api/a/{keys['adj']}/state").status_code == 404
    queue = client.get(f"/api/adj/{keys['adj']}/queue").json()
    assert "gold" not in json.dumps(queue)
    # The app sends no-store and no-referrer (keys are in the URLs).
    r = client.get(f"/a/{keys['h1']}")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_status_and_agreement(answered: dict[str, Any]) -> None:
    from sklearn.metrics import cohen_kappa_score

    res = _invoke("status", "--db", str(answered["db"]))
    assert res.exit_code == 0
    assert f"h1: {TOTAL}/{TOTAL}" in res.stdout and f"h3: {TOTAL - 1}/{TOTAL}" in res.stdout
    out_json = answered["tmp"] / "agreement.json"
    res = _invoke(
        "agreement", "--db", str(answered["db"]), "--study", "friends-h", "--json", str(out_json)
    )
    assert res.exit_code == 0, res.output
    rows = {r["slice"]: r for r in json.loads(out_json.read_text())}
    assert set(rows) == {f"decision/{c}" for c in ("all", "I1", "I2", "S1", "S2", "S3", "SA")}
    a = answered["answers"]
    common = sorted(set(a["h1"]) & set(a["h3"]))
    pair = next(p for p in rows["decision/all"]["pairwise"] if (p["a"], p["b"]) == ("h1", "h3"))
    assert pair["n_items"] == TOTAL - 1
    assert pair["kappa"] == pytest.approx(
        cohen_kappa_score([a["h1"][i] for i in common], [a["h3"][i] for i in common])
    )
    assert rows["decision/all"]["fleiss_items"] == TOTAL - 1
    assert rows["decision/all"]["alpha_items"] == TOTAL
    assert "Fleiss" in res.stdout


def test_score_table4_layout_and_model_rows(answered: dict[str, Any], bench: Path) -> None:
    from polylogue.evaluation import metrics

    # A model run from the evaluation harness, scored on the same items.
    runs = answered["tmp"] / "runs"
    r = runner.invoke(
        cli,
        [
            "eval",
            "--data",
            str(bench),
            "--model",
            "baseline:always-speak",
            "--out",
            str(runs),
            "--n-boot",
            "0",
            "--no-progress",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    run_folder = next(p for p in runs.iterdir() if (p / "predictions.jsonl").is_file())
    md = answered["tmp"] / "table.md"
    res = _invoke(
        "score",
        "--db",
        str(answered["db"]),
        "--study",
        "friends-h",
        "--predictions",
        f"model={run_folder}",
        "--markdown",
        str(md),
    )
    assert res.exit_code == 0, res.output
    lines = [ln for ln in md.read_text().splitlines() if ln.startswith("| ")]
    assert lines[0] == "| Rater | I1 | I2 | S1 | S2 | S3 | SA | Acc | F1avg | BalAcc | missing |"
    rows = {ln.split(" | ")[0][2:]: ln.strip("| ").split(" | ") for ln in lines[1:]}
    assert list(rows) == ["h1", "h2", "h3", "Average", "Majority", "model"]
    assert rows["h1"][1:10] == ["100.00"] * 9  # follows gold
    # h2 always says SPEAK: I1 = I2 = 100, S1 = S2 = S3 = SA = 0, BalAcc = 50.
    assert rows["h2"][1:7] == ["100.00", "100.00", "0.00", "0.00", "0.00", "0.00"]
    assert rows["h2"][9] == "50.00"
    # h3 against the harness's metric functions directly (the missing answer counts as wrong).
    gold, ans = answered["gold"], answered["answers"]["h3"]
    ids = sorted(gold)
    acc = metrics.accuracy([gold[i] for i in ids], [ans.get(i) for i in ids])
    assert rows["h3"][7] == f"{100 * acc:.2f}" and rows["h3"][10] == "1"
    # Average is the mean of the annotator rows, as in the paper's Table 4.
    assert float(rows["Average"][7]) == pytest.approx(
        (float(rows["h1"][7]) + float(rows["h2"][7]) + float(rows["h3"][7])) / 3, abs=0.01
    )
    # The harness's always-speak baseline answers like h2 did, so it scores exactly the same.
    assert rows["model"][1:] == rows["h2"][1:]


def test_adjudicate_export_answers_and_adjudicated_set(answered: dict[str, Any]) -> None:
    from polylogue.turntaking.dataset import load_benchmark

    db, tmp = str(answered["db"]), answered["tmp"]
    a = answered["answers"]
    # With three annotators, a tie is possible only where h3 left the item open and h1 != h2.
    res = _invoke("adjudicate", "--db", db, "--study", "friends-h")
    assert res.exit_code == 0
    ties = [i for i in answered["gold"] if i not in a["h3"] and a["h1"][i] != a["h2"][i]]
    assert len(ties) == 1 and res.stdout.count("tie  ") == 1

    csv_path = tmp / "answers.csv"
    res = _invoke("export", "--db", db, "--study", "friends-h", "--answers", str(csv_path))
    assert res.exit_code == 0
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == TOTAL + TOTAL + TOTAL - 1
    assert {(r["annotator"], r["item_id"], r["label"]) for r in rows} == {
        (n, i, lab) for n, d in a.items() for i, lab in d.items()
    }
    jl = tmp / "answers.jsonl"
    assert (
        _invoke("export", "--db", db, "--study", "friends-h", "--answers", str(jl)).exit_code == 0
    )
    assert len(jl.read_text().splitlines()) == len(rows)

    out = tmp / "adjudicated"
    res = _invoke("export", "--db", db, "--study", "friends-h", "--adjudicated", str(out))
    assert res.exit_code == 2 and "no majority" in res.output
    dropped = tmp / "dropped"
    res = _invoke(
        "export",
        "--db",
        db,
        "--study",
        "friends-h",
        "--adjudicated",
        str(dropped),
        "--allow-unresolved",
    )
    assert res.exit_code == 0 and len(load_benchmark(dropped).points("test")) == TOTAL - 1
    # The adjudicator decides the tie (through the API, as the adjudicator view does).
    r = answered["client"].post(
        f"/api/adj/{answered['keys']['adj']}/decisions",
        json={"item_id": ties[0], "question_id": "decision", "label": "SILENT"},
    )
    assert r.status_code == 200
    res = _invoke("export", "--db", db, "--study", "friends-h", "--adjudicated", str(out))
    assert res.exit_code == 0, res.output
    bench = load_benchmark(out)
    points = {p.point_id: p for p in bench.points("test")}
    assert set(points) == set(answered["gold"])
    for i, p in points.items():
        votes = [d[i] for d in a.values() if i in d]
        expected = "SILENT" if i in ties else max(set(votes), key=votes.count)
        assert p.gold.label.value == expected
        # The category follows the human decision.
        assert p.gold.category.decision.value == expected
    assert bench.manifest["human_labels"]["study"] == "friends-h"


def test_create_errors_are_clear(bench: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "x.sqlite")
    res = _invoke("create", "--db", db, "--study", "s", "--annotators", "h1")
    assert res.exit_code == 2 and "exactly one of" in res.output
    res = _invoke(
        "create",
        "--db",
        db,
        "--study",
        "s",
        "--annotators",
        "h1",
        "--benchmark",
        str(bench),
        "--split",
        "dev",
    )
    assert res.exit_code == 2 and "no split 'dev'" in res.output
    res = _invoke(
        "create",
        "--db",
        db,
        "--study",
        "s",
        "--annotators",
        "h1",
        "--benchmark",
        str(bench),
        "--quota",
        "I1=x",
    )
    assert res.exit_code == 2 and "CATEGORY=N" in res.output
    res = _invoke("agreement", "--db", db, "--study", "missing")
    assert res.exit_code == 2 and "no study named 'missing'" in res.output


def test_meetingtom_study_via_cli(tmp_path: Path) -> None:
    db = tmp_path / "tom.sqlite"
    res = _invoke(
        "create",
        "--db",
        str(db),
        "--study",
        "tom",
        "--meetingtom",
        str(corpus_dir("meetingtom")),
        "--tasks",
        "you,consensus",
        "--per-category",
        "2",
        "--annotators",
        "a,b",
    )
    assert res.exit_code == 0, res.output
    store = AnnotationStore(db)
    items = store.items(store.study("tom"))
    assert sorted(it.category for it in items) == ["consensus", "consensus", "you", "you"]
    keys = _links(res.stdout)
    client = TestClient(create_study_app(store))
    item = client.get(f"/api/a/{keys['a']}/items/0").json()
    assert [q["id"] for q in item["questions"]] == ["Q1", "Q2"]
    assert item["payload"]["transcript"]  # AMI words of the session
    q1 = item["questions"][0]
    r = client.put(f"/api/a/{keys['a']}/items/0/answers/Q1", json={"label": q1["options"][0]})
    assert r.json()["progress"]["done"] == 0  # Q2 still open
    r = client.put(
        f"/api/a/{keys['a']}/items/0/answers/Q2", json={"label": item["questions"][1]["options"][1]}
    )
    assert r.json()["progress"] == {"done": 1, "total": 4, "next_position": 1}
    assert client.get(f"/api/a/{keys['a']}/media/0/Q1").status_code == 404  # no media given

    # Both annotators answer every question with its last option; the adjudicated export is a
    # MeetingToM folder that the tom loader reads back, with the human answers as gold.
    for name in ("a", "b"):
        for pos in range(4):
            view = client.get(f"/api/a/{keys[name]}/items/{pos}").json()
            for q in view["questions"]:
                body = {"label": q["options"][-1]}
                assert (
                    client.put(
                        f"/api/a/{keys[name]}/items/{pos}/answers/{q['id']}", json=body
                    ).status_code
                    == 200
                )
    out = tmp_path / "tom-adjudicated"
    res = _invoke("export", "--db", str(db), "--study", "tom", "--adjudicated", str(out))
    assert res.exit_code == 0, res.output
    from polylogue.tom.records import load_tom_benchmark

    back = load_tom_benchmark(out, tasks=["you", "consensus"]).by_id()
    assert set(back) == {it.item_id for it in items}
    for rec in back.values():
        options = {qid: q.options[-1] for qid, q in rec.item.questions.items()}
        assert rec.gold.answers == options


def test_binding_rules_and_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    check_binding("127.0.0.1", allow_remote=False, token=None)
    with pytest.raises(AccessError, match="--allow-remote"):
        check_binding("0.0.0.0", allow_remote=False, token="x" * 32)
    with pytest.raises(AccessError, match="token"):
        check_binding("0.0.0.0", allow_remote=True, token=None)
    with pytest.raises(AccessError, match="16 characters"):
        check_binding("0.0.0.0", allow_remote=True, token="short")
    with pytest.raises(AccessError, match="not random enough"):
        check_binding("0.0.0.0", allow_remote=True, token="x" * 32)
    check_binding("0.0.0.0", allow_remote=True, token="hX3-q9Lr_Z2vKw8TnB5y")
    res = _invoke("serve", "--db", "nowhere.sqlite", "--host", "0.0.0.0")
    assert res.exit_code == 2 and "--allow-remote" in res.output


def test_token_is_required_on_every_request(tmp_path: Path) -> None:
    token = "t0ken-" + "x" * 20
    client = TestClient(create_study_app(AnnotationStore(tmp_path / "t.sqlite"), token=token))
    assert client.get("/").status_code == 401
    assert client.get("/static/style.css").status_code == 401
    assert client.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    # ?token= once sets an HttpOnly cookie for the following requests.
    first = client.get(f"/?token={token}")
    assert first.status_code == 200 and "httponly" in first.headers["set-cookie"].lower()
    assert client.get("/static/style.css").status_code == 200
