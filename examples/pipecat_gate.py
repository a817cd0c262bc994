"""Polylogue's gate in a real Pipecat pipeline, replaying a transcript as STT output.

    python examples/pipecat_gate.py examples/standup.jsonl --as Dave

In a voice bot the gate sits between speech-to-text and the user context aggregator::

    Pipeline([transport.input(), stt, PolylogueGate(agent_name="Dave"),
              context_aggregator.user(), llm, tts, transport.output(),
              context_aggregator.assistant()])

Here the transcript's lines are queued as ``TranscriptionFrame`` s (the bot's own lines as
bot speech with TTS text) and a small processor after the gate prints what would reach the LLM: the
transcriptions it should answer, and ``LLMMessagesAppendFrame(run_llm=False)`` context for
the rest. Needs `pip install 'polylogue[pipecat]'`; runs offline.
"""

from __future__ import annotations

import argparse
import asyncio

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    LLMMessagesAppendFrame,
    TranscriptionFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from polylogue.adapters.pipecat import PolylogueGate
from polylogue.corpora.transcripts import read_transcript


class ShowLLMInput(FrameProcessor):
    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame):
            print(f"  -> LLM answers {frame.user_id}: {frame.text}")
        elif isinstance(frame, LLMMessagesAppendFrame):
            print(f"     context only: {frame.messages[0]['content']}")
        await self.push_frame(frame, direction)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("transcript")
    ap.add_argument("--as", dest="agent", required=True)
    args = ap.parse_args()
    conv = read_transcript(args.transcript)
    gate = PolylogueGate(agent_name=args.agent, participants=conv.participants)
    agent = gate.live.agent.pid
    # In a bot the tap sits after the TTS; here the bot's lines are queued as TTS text.
    task = PipelineTask(Pipeline([gate, gate.agent_speech_tap(), ShowLLMInput()]))
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    for u in conv.utterances:
        if u.speaker == agent:
            frames: list[Frame] = [
                BotStartedSpeakingFrame(),
                TTSTextFrame(u.text, text_type="sentence"),
                BotStoppedSpeakingFrame(),
            ]
        else:
            frames = [TranscriptionFrame(u.text, u.speaker, "")]
        # System frames (bot speaking) jump the queue; pace the replay like live speech.
        await task.queue_frames(frames)
        await asyncio.sleep(0.05)
    await task.queue_frames([EndFrame()])
    await runner


if __name__ == "__main__":
    asyncio.run(main())
