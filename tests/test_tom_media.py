"""Media pipeline on short synthetic AMI-like videos generated here with the bundled ffmpeg.

AMI video is not available in this environment, so a fake AMI tree is built with one colour per
camera view; the tests check cut times, clamping of negative starts, the mosaic tile layout
(colour sampled per tile), audio presence and deterministic frame times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("imageio_ffmpeg")

from polylogue.tom.media import (
    AmiMediaSource,
    FrameSampling,
    MediaError,
    build_record_media,
    clamp_window,
    corner_layout_text,
    cut_clip,
    extract_frames,
    mosaic_layout_text,
    probe,
    run_ffmpeg,
)
from polylogue.tom.records import Mosaic, Reconstruction, SourceWindow, ToMTask

SESSION = "ES2099a"
COLOURS = {  # view -> RGB
    "Closeup1": (255, 0, 0),
    "Closeup2": (0, 255, 0),
    "Closeup3": (0, 0, 255),
    "Closeup4": (255, 255, 0),
    "Corner": (255, 255, 255),
}
DURATION = 8


def _hex(rgb: tuple[int, int, int]) -> str:
    return "0x{:02x}{:02x}{:02x}".format(*rgb)


@pytest.fixture(scope="module")
def ami_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ami")
    video_dir = root / SESSION / "video"
    video_dir.mkdir(parents=True)
    for view, rgb in COLOURS.items():
        # 25 fps like AMI; a frame counter drawn by the testsrc pattern is not needed: colour
        # identifies the view, and timestamps are checked through frame counts and pts.
        run_ffmpeg(
            [
                "-f",
                "lavfi",
                "-i",
                f"color=c={_hex(rgb)}:size=352x288:rate=25:duration={DURATION}",
                "-c:v",
                "mpeg4",
                "-q:v",
                "3",
                str(video_dir / f"{SESSION}.{view}.avi"),
            ]
        )
    audio_dir = root / SESSION / "audio"
    audio_dir.mkdir()
    run_ffmpeg(
        [
            "-f",
            "lavfi",
            "-i",
            f"sine=frequency=440:sample_rate=16000:duration={DURATION}",
            str(audio_dir / f"{SESSION}.Mix-Headset.wav"),
        ]
    )
    return root


def _recon(task: ToMTask, start: float, duration: float) -> Reconstruction:
    mosaic = Mosaic("Closeup1", "Closeup2", "Closeup3", "Closeup4", 320, 180, 640, 360)
    mapping = {"Closeup1": "D", "Closeup2": "B", "Closeup3": "C", "Closeup4": "A"}
    if task is ToMTask.STATE:
        return Reconstruction(
            id=f"state:{SESSION}_state0001_w0",
            task=task,
            bundle_name=f"{SESSION}_state0001_w0",
            session_id=SESSION,
            source_window=SourceWindow(start, start + duration, duration),
            required_views=("Closeup3",),
            source_bundle_name=f"{SESSION}_state0001",
            window_index=0,
            target_agent="C",
            target_view="Closeup3",
        )
    return Reconstruction(
        id=f"{task.value}:{SESSION}_x",
        task=task,
        bundle_name=f"{SESSION}_{task.value}0001",
        session_id=SESSION,
        source_window=SourceWindow(start, start + duration, duration),
        required_views=("Closeup1", "Closeup2", "Closeup3", "Closeup4"),
        mosaic=mosaic,
        closeup_to_agent=mapping,
    )


def _first_frame(path: Path) -> np.ndarray:
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    w, h = meta["size"]
    frame = np.frombuffer(next(reader), dtype=np.uint8).reshape(h, w, 3)
    reader.close()
    return frame


def test_state_clip_cut_and_audio(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(_recon(ToMTask.STATE, 2.0, 3.0), AmiMediaSource(ami_root), tmp_path)
    clip = media.files["clip"]
    assert clip == tmp_path / "state" / f"{SESSION}_state0001_w0" / "media" / "clip.mp4"
    info = probe(clip)
    assert info.frames == 75  # exactly 3 s at 25 fps
    assert info.has_audio
    assert np.allclose(_first_frame(clip).reshape(-1, 3).mean(0), COLOURS["Closeup3"], atol=12)


def test_negative_start_is_clamped_keeping_the_window_end(ami_root: Path, tmp_path: Path) -> None:
    recon = _recon(ToMTask.STATE, -2.0, 5.0)
    assert clamp_window(recon.source_window) == (0.0, 3.0)
    media = build_record_media(recon, AmiMediaSource(ami_root), tmp_path)
    assert media.clamped and media.start == 0.0 and media.duration == 3.0
    assert probe(media.files["clip"]).frames == 75
    with pytest.raises(MediaError):
        cut_clip(
            ami_root / SESSION / "video" / f"{SESSION}.Corner.avi", tmp_path / "x.mp4", -1.0, 2
        )


def test_mosaic_layout_tiles_and_audio(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(
        _recon(ToMTask.CONSENSUS, 1.0, 2.0), AmiMediaSource(ami_root), tmp_path
    )
    mosaic = media.files["mosaic"]
    info = probe(mosaic)
    assert info.size == (640, 360) and info.has_audio and info.frames == 50
    frame = _first_frame(mosaic)
    tiles = {
        "Closeup1": frame[:180, :320],
        "Closeup2": frame[:180, 320:],
        "Closeup3": frame[180:, :320],
        "Closeup4": frame[180:, 320:],
    }
    for view, tile in tiles.items():
        assert np.allclose(tile.reshape(-1, 3).mean(0), COLOURS[view], atol=12), view


def test_you_builds_corner_and_mosaic(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(
        _recon(ToMTask.YOU, 0.0, 2.0), AmiMediaSource(ami_root), tmp_path, corner_audio=False
    )
    assert set(media.files) == {"Q1_corner", "Q2_mosaic"}
    corner = probe(media.files["Q1_corner"])
    assert not corner.has_audio and corner.size == (352, 288)
    assert probe(media.files["Q2_mosaic"]).has_audio


def test_frame_sampling_is_deterministic(ami_root: Path, tmp_path: Path) -> None:
    assert FrameSampling().times(5.0) == (0.0, 2.0, 4.0)
    assert FrameSampling(fps=0.5).times(50.0)[-1] == 48.0
    assert len(FrameSampling(fps=0.5, max_frames=10).times(50.0)) == 10
    assert FrameSampling(count=4, max_frames=None).times(8.0) == (1.0, 3.0, 5.0, 7.0)
    capped = FrameSampling(fps=2.0, max_frames=5).times(10.0)
    assert capped[0] == 0.0 and len(capped) == 5 and list(capped) == sorted(capped)
    video = ami_root / SESSION / "video" / f"{SESSION}.Closeup2.avi"
    frames = extract_frames(video, tmp_path / "frames", FrameSampling(fps=0.5))
    assert [f.time for f in frames] == [0.0, 2.0, 4.0, 6.0]
    assert all(f.path.is_file() and f.path.stat().st_size > 0 for f in frames)


def test_layout_texts_and_missing_inputs(ami_root: Path, tmp_path: Path) -> None:
    recon = _recon(ToMTask.CONSENSUS, 0.0, 2.0)
    text = mosaic_layout_text(recon)
    assert "top-left tile: participant D" in text and "bottom-right tile: participant A" in text
    assert "D (close-up camera 1)" in corner_layout_text(recon)
    with pytest.raises(MediaError, match="no file named"):
        AmiMediaSource(tmp_path).video(SESSION, "Closeup1")
    with pytest.raises(MediaError, match="Mix-Headset"):
        AmiMediaSource(tmp_path).audio(SESSION)


class _FakeChatServer:
    """A local OpenAI-compatible endpoint that records requests and answers with fixed JSON."""

    def __init__(self, reply: str) -> None:
        import http.server
        import json
        import threading

        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                data = json.dumps(
                    {"choices": [{"message": {"content": reply}}], "usage": {"prompt_tokens": 7}}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


def test_video_variant_sends_sampled_frames_to_a_chat_server(
    ami_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run a video-only variant through the runner: media cut, frames sampled, images posted."""
    from polylogue.tom.backends import OpenAIChatGenerator
    from polylogue.tom.media import frames_for_record
    from polylogue.tom.prompts import parse_variant
    from polylogue.tom.records import ToMGold, ToMItem, ToMRecord, load_tom_benchmark
    from polylogue.tom.runner import run_tom
    from polylogue.tom.scoring import strict_from_rows

    bench = load_tom_benchmark()
    real = bench.by_id()["consensus:ES2002a_consensus0009"]
    recon = _recon(ToMTask.CONSENSUS, 0.0, 4.0)
    item = ToMItem(
        id="consensus:ES2099a_consensus0001",
        task=ToMTask.CONSENSUS,
        bundle_name="ES2099a_consensus0001",
        session_id=SESSION,
        questions=real.item.questions,
        reconstruction=recon,
    )
    record = ToMRecord(item, ToMGold(item.id, {"Q1": "TRUE_CONSENSUS", "Q2": "NONE"}))
    options = parse_variant("noprompt+video")
    source = AmiMediaSource(ami_root)

    def media(rec: ToMRecord, opts: Any) -> Any:
        built = build_record_media(rec.item.reconstruction, source, tmp_path / "media")
        return frames_for_record(built, tmp_path / "frames", opts.frame_sampling)

    server = _FakeChatServer('Looks fine.\n{"Q1":"TRUE_CONSENSUS","Q2":"NONE"}')
    monkeypatch.setenv("TOM_TEST_KEY", "secret-123")
    try:
        gen = OpenAIChatGenerator("vlm", server.url, api_key_env="TOM_TEST_KEY")
        run = run_tom(bench, [record], gen, options, tmp_path / "runs", media=media)
    finally:
        server.close()
    assert run.errors == 0 and len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer secret-123"
    parts = req["body"]["messages"][1]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 2  # 4 s at 0.5 fps -> frames at 0 s and 2 s
    assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in images)
    assert (
        "top-left tile: participant D" in parts[0]["text"] and "Transcript" not in parts[0]["text"]
    )
    assert "secret-123" not in (run.folder / "manifest.json").read_text()
    answers = strict_from_rows([record], run.rows)
    assert answers[record.id] == {"Q1": "TRUE_CONSENSUS", "Q2": "NONE"}
