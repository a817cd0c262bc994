"""Media for MeetingToM records, cut from a user's local licensed AMI copy with ffmpeg.

Follows the release's reconstruction metadata: STATE -> the target close-up clip (+ Mix-Headset
audio); YOU -> the Corner view (Q1) and the 2x2 close-up mosaic (Q2); CONSENSUS -> the mosaic.
The mosaic is Closeup1 top-left, 2 top-right, 3 bottom-left, 4 bottom-right, each tile scaled
to exactly 640x360 (no aspect preservation, as the release builds it) into 1280x720.

Deliberate differences from the release scripts, each measured with the bundled ffmpeg:
* a negative start is clamped to 0 and the duration shortened so the window *end* is kept
  (ffmpeg would otherwise exit 0 with a shifted or empty output);
* every output is probed afterwards and must hold at least one frame;
* frames are extracted one ffmpeg call per requested time with input-side seeking, whose rule is
  "first frame with pts >= t", so frame times are deterministic and documented.

ffmpeg comes from the ``imageio-ffmpeg`` wheel (extra ``video``); no system ffmpeg is needed.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from polylogue.errors import PolylogueInputError
from polylogue.tom.records import CLOSEUP_VIEWS, Mosaic, Reconstruction, SourceWindow, ToMTask

DEFAULT_TILE = (640, 360)
_DEFAULT_MOSAIC = Mosaic("Closeup1", "Closeup2", "Closeup3", "Closeup4")


class MediaError(PolylogueInputError, RuntimeError):
    # RuntimeError kept as a base so that callers catching it before still do.
    """ffmpeg failed, an input is missing or ambiguous, or an output came out empty."""


def confined(root: Path, *parts: str, what: str = "record") -> Path:
    """``root / parts...``, resolved, and refused unless it stays inside ``root``: a record's
    names become folder names, and none may lead out of the output folder (``../``, an
    absolute path, a link)."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise MediaError(
            f"{what}: {'/'.join(parts)!r} leads outside the output folder {root}; nothing written"
        )
    return path


def ffmpeg_exe() -> str:
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MediaError("install the 'video' extra (imageio-ffmpeg) to cut AMI media") from exc
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def run_ffmpeg(args: Sequence[str]) -> None:
    cmd = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", "-loglevel", "error", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise MediaError(
            f"ffmpeg failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()}"
        )


@dataclass(frozen=True, slots=True)
class VideoInfo:
    frames: int
    duration: float
    fps: float | None
    size: tuple[int, int] | None
    has_audio: bool


def probe(path: str | Path) -> VideoInfo:
    """Frame count, duration, rate, size and audio presence (imageio-ffmpeg has no ffprobe)."""
    import imageio_ffmpeg

    path = str(path)
    reader = imageio_ffmpeg.read_frames(path)
    try:
        meta = next(reader)
    finally:
        reader.close()
    frames, secs = imageio_ffmpeg.count_frames_and_secs(path)
    size = meta.get("size")
    return VideoInfo(
        frames=int(frames),
        duration=float(secs),
        fps=meta.get("fps"),
        size=(int(size[0]), int(size[1])) if size else None,
        has_audio=bool(meta.get("audio_codec")),
    )


def _check_output(path: Path) -> VideoInfo:
    if not path.is_file() or path.stat().st_size == 0:
        raise MediaError(f"ffmpeg wrote no output at {path}")
    info = probe(path)
    if info.frames < 1:
        raise MediaError(f"{path} holds no video frames")
    return info


# ----------------------------------------------------------------------------- locating AMI files


@dataclass(frozen=True, slots=True)
class AmiMediaSource:
    """Where the user's AMI video and audio live.

    Video: ``<root>/<session>/video/<session>.<View>.avi``, else a unique file of that name below
    the root (names containing ``_orig`` ignored). Audio: ``<session>.Mix-Headset.wav``.
    """

    ami_root: Path
    audio_root: Path | None = None

    def video(self, session: str, view: str) -> Path:
        name = f"{session}.{view}.avi"
        direct = self.ami_root / session / "video" / name
        if direct.is_file():
            return direct
        found = [p for p in self.ami_root.rglob(name) if "_orig" not in p.name]
        if len(found) != 1:
            what = "no file" if not found else f"{len(found)} files"
            raise MediaError(f"{what} named {name} under {self.ami_root}")
        return found[0]

    def audio(self, session: str) -> Path:
        name = f"{session}.Mix-Headset.wav"
        roots = [r for r in (self.audio_root, self.ami_root) if r is not None]
        for root in roots:
            for cand in (root / name, root / session / name, root / session / "audio" / name):
                if cand.is_file():
                    return cand
        for root in roots:
            found = sorted(root.rglob(name))
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise MediaError(f"{len(found)} files named {name} under {root}")
        raise MediaError(f"no file named {name} under {', '.join(map(str, roots))}")


# ----------------------------------------------------------------------------- cutting


@dataclass(frozen=True, slots=True)
class EncodeOptions:
    crf: int = 23
    preset: str = "veryfast"
    audio_bitrate: str = "128k"


def clamp_window(window: SourceWindow, media_duration: float | None = None) -> tuple[float, float]:
    """(start, duration) actually cut: start >= 0, window end kept, not past the media end."""
    start = max(0.0, window.start)
    end = window.end if media_duration is None else min(window.end, media_duration)
    if end <= start:
        raise MediaError(f"window {window} is empty after clamping to [0, {media_duration}]")
    return start, end - start


def cut_clip(
    video: Path,
    out: Path,
    start: float,
    duration: float,
    audio: Path | None = None,
    enc: EncodeOptions = EncodeOptions(),
) -> VideoInfo:
    """Re-encode ``[start, start+duration)`` of ``video`` (+ the same span of ``audio``)."""
    if start < 0:
        raise MediaError(f"negative start {start}: clamp the window first")
    out.parent.mkdir(parents=True, exist_ok=True)
    args = ["-ss", f"{start:.3f}", "-t", f"{duration:.3f}", "-i", str(video)]
    if audio is not None:
        args += ["-ss", f"{start:.3f}", "-t", f"{duration:.3f}", "-i", str(audio)]
        args += [
            "-map",
            "0:v:0",
            "-map",
            "1:a:0",
            "-c:a",
            "aac",
            "-b:a",
            enc.audio_bitrate,
            "-shortest",
        ]
    else:
        args += ["-map", "0:v:0", "-an"]
    args += [*_video_codec(enc), "-movflags", "+faststart", str(out)]
    run_ffmpeg(args)
    return _check_output(out)


def _video_codec(enc: EncodeOptions) -> list[str]:
    return ["-c:v", "libx264", "-crf", str(enc.crf), "-preset", enc.preset, "-pix_fmt", "yuv420p"]


def cut_audio(audio: Path, out: Path, start: float, duration: float, rate: int = 16000) -> Path:
    """Mono 16-bit PCM WAV of ``[start, start+duration)`` (the mosaic's audio track)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    run_ffmpeg(
        [
            "-ss",
            f"{start:.3f}",
            "-t",
            f"{duration:.3f}",
            "-i",
            str(audio),
            "-ac",
            "1",
            "-ar",
            str(rate),
            "-c:a",
            "pcm_s16le",
            str(out),
        ]
    )
    if not out.is_file() or out.stat().st_size <= 44:
        raise MediaError(f"no audio samples were cut into {out}")
    return out


def build_mosaic(
    tiles: Sequence[Path],
    out: Path,
    tile_size: tuple[int, int] = DEFAULT_TILE,
    audio: Path | None = None,
    enc: EncodeOptions = EncodeOptions(),
) -> VideoInfo:
    """Stack four clips 2x2 (TL, TR, BL, BR), each scaled to exactly ``tile_size``."""
    if len(tiles) != 4:
        raise MediaError(f"a 2x2 mosaic needs 4 tiles, got {len(tiles)}")
    w, h = tile_size
    out.parent.mkdir(parents=True, exist_ok=True)
    args: list[str] = []
    for t in tiles:
        args += ["-i", str(t)]
    if audio is not None:
        args += ["-i", str(audio)]
    norm = f"scale={w}:{h},setsar=1,format=yuv420p"
    graph = ";".join(f"[{i}:v]{norm}[t{i}]" for i in range(4))
    graph += ";[t0][t1][t2][t3]xstack=inputs=4:layout=0_0|w0_0|0_h0|w0_h0:fill=black[v]"
    args += ["-filter_complex", graph, "-map", "[v]"]
    if audio is not None:
        args += ["-map", "4:a:0", "-c:a", "aac", "-b:a", enc.audio_bitrate, "-shortest"]
    else:
        args += ["-an"]
    args += [*_video_codec(enc), "-movflags", "+faststart", str(out)]
    run_ffmpeg(args)
    return _check_output(out)


@dataclass(frozen=True, slots=True)
class RecordMedia:
    """Files built for one record; keys are the roles prompts refer to."""

    record_id: str
    files: dict[str, Path]
    start: float
    duration: float
    clamped: bool


def build_record_media(
    recon: Reconstruction,
    source: AmiMediaSource,
    out_root: Path,
    enc: EncodeOptions = EncodeOptions(),
    with_audio: bool = True,
    corner_audio: bool = True,
) -> RecordMedia:
    """Build ``<out_root>/<task>/<bundle>/media/`` for one record, as the release describes.

    STATE: ``clip.mp4``; YOU: ``Q1_corner.mp4`` + ``Q2_mosaic.mp4``; CONSENSUS: ``mosaic.mp4``.
    ``corner_audio`` follows the release script (audio muxed into the Corner clip); its summary
    file says the Corner clip has none, so both are offered.
    """
    folder = confined(out_root, recon.task.value, recon.bundle_name, "media", what=recon.id)
    out_root.mkdir(parents=True, exist_ok=True)
    start, duration = clamp_window(recon.source_window)
    audio = source.audio(recon.session_id) if with_audio else None
    files: dict[str, Path] = {}
    if recon.task is ToMTask.STATE:
        if not recon.target_view:
            raise MediaError(f"{recon.id}: STATE record without target_view")
        files["clip"] = folder / "clip.mp4"
        cut_clip(
            source.video(recon.session_id, recon.target_view),
            files["clip"],
            start,
            duration,
            audio,
            enc,
        )
    else:
        mosaic = recon.mosaic or _DEFAULT_MOSAIC
        tile = (mosaic.tile_width or DEFAULT_TILE[0], mosaic.tile_height or DEFAULT_TILE[1])
        with tempfile.TemporaryDirectory(dir=out_root) as tmp_name:
            tmp = Path(tmp_name)
            tiles = []
            for _, view in mosaic.tiles:
                t = tmp / f"{view}.mp4"
                cut_clip(source.video(recon.session_id, view), t, start, duration, None, enc)
                tiles.append(t)
            wav = cut_audio(audio, tmp / "audio.wav", start, duration) if audio else None
            name = "Q2_mosaic" if recon.task is ToMTask.YOU else "mosaic"
            files[name] = folder / f"{name}.mp4"
            build_mosaic(tiles, files[name], tile, wav, enc)
        if recon.task is ToMTask.YOU:
            files["Q1_corner"] = folder / "Q1_corner.mp4"
            corner = source.video(recon.session_id, "Corner")
            cut_clip(
                corner, files["Q1_corner"], start, duration, audio if corner_audio else None, enc
            )
    return RecordMedia(recon.id, files, start, duration, clamped=recon.source_window.start < 0)


# ----------------------------------------------------------------------------- frames


@dataclass(frozen=True, slots=True)
class FrameSampling:
    """Which frame times to show a model: a rate (default 0.5 fps) or a fixed count, capped."""

    fps: float | None = 0.5
    count: int | None = None
    max_frames: int | None = 32

    def times(self, duration: float) -> tuple[float, ...]:
        """Deterministic times in seconds from the clip start.

        Rate mode: ``0, 1/fps, 2/fps, ...`` below ``duration``. Count mode: the centres of
        ``count`` equal slices. If more than ``max_frames`` result, an evenly spread subset
        (always keeping the first) is returned.
        """
        if duration <= 0:
            return ()
        if self.count is not None:
            n = max(1, self.count)
            times = [duration * (i + 0.5) / n for i in range(n)]
        else:
            fps = self.fps or 0.5
            n = max(1, math.ceil(duration * fps - 1e-9))
            times = [i / fps for i in range(n)]
        if self.max_frames is not None and len(times) > self.max_frames:
            m = self.max_frames
            idx = [round(i * (len(times) - 1) / (m - 1)) if m > 1 else 0 for i in range(m)]
            times = [times[i] for i in dict.fromkeys(idx)]
        return tuple(round(t, 6) for t in times)

    def describe(self) -> str:
        if self.count is not None:
            return f"{self.count} frames evenly spread (max {self.max_frames})"
        return f"{self.fps} fps (max {self.max_frames})"


@dataclass(frozen=True, slots=True)
class Frame:
    time: float
    path: Path


def extract_frames(
    video: Path, out_dir: Path, sampling: FrameSampling = FrameSampling(), width: int | None = None
) -> list[Frame]:
    """JPEG frames at :meth:`FrameSampling.times`: the first frame with pts >= t, one call each."""
    info = probe(video)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for i, t in enumerate(sampling.times(info.duration)):
        path = out_dir / f"frame_{i:03d}_{t:08.3f}.jpg"
        vf = ["-vf", f"scale={width}:-2"] if width else []
        run_ffmpeg(
            ["-ss", f"{t:.3f}", "-i", str(video), "-frames:v", "1", *vf, "-q:v", "2", str(path)]
        )
        if not path.is_file():
            raise MediaError(f"no frame at t={t:.3f}s in {video} (duration {info.duration:.3f}s)")
        frames.append(Frame(t, path))
    return frames


# ----------------------------------------------------------------------------- layout text


def mosaic_layout_text(recon: Reconstruction) -> str:
    """Which participant letter is shown in which mosaic tile (for YOU Q2 / CONSENSUS)."""
    mosaic = recon.mosaic or _DEFAULT_MOSAIC
    lines = ["The video is a 2x2 grid of close-up cameras, one person per tile:"]
    for pos, view in mosaic.tiles:
        agent = recon.agent_of_view(view) or "unknown"
        lines.append(f"- {pos} tile: participant {agent}")
    return "\n".join(lines)


def corner_layout_text(recon: Reconstruction) -> str:
    """What the Corner view shows (for YOU Q1).

    The release does not say where each letter sits in the Corner view (the official text is
    unpublished); we state only what the metadata supports and point at the mosaic mapping.
    """
    known = ", ".join(
        f"{recon.closeup_to_agent[v]} (close-up camera {v[-1]})"
        for v in CLOSEUP_VIEWS
        if v in recon.closeup_to_agent
    )
    return (
        "The corner video is a wide shot of the whole meeting room from one corner; it shows all "
        "four participants around the table, who are not labelled in the picture. Use who is "
        "speaking, where people look and how their heads and bodies turn to tell them apart."
        + (f" Participants: {known}." if known else "")
    )


@dataclass(frozen=True, slots=True)
class PromptMedia:
    """Media shown with one prompt: videos (for video-capable servers) or sampled frames."""

    videos: dict[str, Path] = field(default_factory=dict)
    frames: dict[str, list[Frame]] = field(default_factory=dict)


def frames_for_record(
    media: RecordMedia, out_dir: Path, sampling: FrameSampling, width: int | None = None
) -> PromptMedia:
    frames = {
        role: extract_frames(path, out_dir / role, sampling, width)
        for role, path in media.files.items()
    }
    return PromptMedia(videos=dict(media.files), frames=frames)
