"""Media pipeline on short synthetic AMI-like videos generated here with the bundled ffmpeg.

AMI video is not available in this environment, so a fake AMI tree is built with one colour per
camera view; the tests check cut times, clamping of negative starts, the mosaic tile layout
(colour sampled per tile), audio presence and deterministic frame times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("imageio_ffmpeg")

from polylogue.tom.media import (  # noqa: E402
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
from polylogue.tom.records import Mosaic, Reconstruction, SourceWindow, Task  # noqa: E402

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
    return "0x%02x%02x%02x" % rgb


@pytest.fixture(scope="module")
def ami_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ami")
    video_dir = root / SESSION / "video"
    video_dir.mkdir(parents=True)
    for view, rgb in COLOURS.items():
        # 25 fps like AMI; a frame counter drawn by the testsrc pattern is not needed: colour
        # identifies the view, and timestamps are checked through frame counts and pts.
        run_ffmpeg(
            ["-f", "lavfi", "-i", f"color=c={_hex(rgb)}:size=352x288:rate=25:duration={DURATION}",
             "-c:v", "mpeg4", "-q:v", "3", str(video_dir / f"{SESSION}.{view}.avi")]
        )  # fmt: skip
    audio_dir = root / SESSION / "audio"
    audio_dir.mkdir()
    run_ffmpeg(
        ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=16000:duration={DURATION}",
         str(audio_dir / f"{SESSION}.Mix-Headset.wav")]
    )  # fmt: skip
    return root


def _recon(task: Task, start: float, duration: float) -> Reconstruction:
    mosaic = Mosaic("Closeup1", "Closeup2", "Closeup3", "Closeup4", 320, 180, 640, 360)
    mapping = {"Closeup1": "D", "Closeup2": "B", "Closeup3": "C", "Closeup4": "A"}
    if task is Task.STATE:
        return Reconstruction(
            id=f"state:{SESSION}_state0001_w0", task=task, bundle_name=f"{SESSION}_state0001_w0",
            session_id=SESSION, source_window=SourceWindow(start, start + duration, duration),
            required_views=("Closeup3",), source_bundle_name=f"{SESSION}_state0001",
            window_index=0, target_agent="C", target_view="Closeup3",
        )  # fmt: skip
    return Reconstruction(
        id=f"{task.value}:{SESSION}_x", task=task, bundle_name=f"{SESSION}_{task.value}0001",
        session_id=SESSION, source_window=SourceWindow(start, start + duration, duration),
        required_views=("Closeup1", "Closeup2", "Closeup3", "Closeup4"), mosaic=mosaic,
        closeup_to_agent=mapping,
    )  # fmt: skip


def _first_frame(path: Path) -> np.ndarray:
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    w, h = meta["size"]
    frame = np.frombuffer(next(reader), dtype=np.uint8).reshape(h, w, 3)
    reader.close()
    return frame


def test_state_clip_cut_and_audio(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(_recon(Task.STATE, 2.0, 3.0), AmiMediaSource(ami_root), tmp_path)
    clip = media.files["clip"]
    assert clip == tmp_path / "state" / f"{SESSION}_state0001_w0" / "media" / "clip.mp4"
    info = probe(clip)
    assert info.frames == 75  # exactly 3 s at 25 fps
    assert info.has_audio
    assert np.allclose(_first_frame(clip).reshape(-1, 3).mean(0), COLOURS["Closeup3"], atol=12)


def test_negative_start_is_clamped_keeping_the_window_end(ami_root: Path, tmp_path: Path) -> None:
    recon = _recon(Task.STATE, -2.0, 5.0)
    assert clamp_window(recon.source_window) == (0.0, 3.0)
    media = build_record_media(recon, AmiMediaSource(ami_root), tmp_path)
    assert media.clamped and media.start == 0.0 and media.duration == 3.0
    assert probe(media.files["clip"]).frames == 75
    with pytest.raises(MediaError):
        cut_clip(ami_root / SESSION / "video" / f"{SESSION}.Corner.avi", tmp_path / "x.mp4", -1.0, 2)


def test_mosaic_layout_tiles_and_audio(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(_recon(Task.CONSENSUS, 1.0, 2.0), AmiMediaSource(ami_root), tmp_path)
    mosaic = media.files["mosaic"]
    info = probe(mosaic)
    assert info.size == (640, 360) and info.has_audio and info.frames == 50
    frame = _first_frame(mosaic)
    tiles = {
        "Closeup1": frame[:180, :320], "Closeup2": frame[:180, 320:],
        "Closeup3": frame[180:, :320], "Closeup4": frame[180:, 320:],
    }  # fmt: skip
    for view, tile in tiles.items():
        assert np.allclose(tile.reshape(-1, 3).mean(0), COLOURS[view], atol=12), view


def test_you_builds_corner_and_mosaic(ami_root: Path, tmp_path: Path) -> None:
    media = build_record_media(
        _recon(Task.YOU, 0.0, 2.0), AmiMediaSource(ami_root), tmp_path, corner_audio=False
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
    recon = _recon(Task.CONSENSUS, 0.0, 2.0)
    text = mosaic_layout_text(recon)
    assert "top-left tile: participant D" in text and "bottom-right tile: participant A" in text
    assert "D (close-up camera 1)" in corner_layout_text(recon)
    with pytest.raises(MediaError, match="no file named"):
        AmiMediaSource(tmp_path).video(SESSION, "Closeup1")
    with pytest.raises(MediaError, match="Mix-Headset"):
        AmiMediaSource(tmp_path).audio(SESSION)
