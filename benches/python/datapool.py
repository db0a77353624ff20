"""The trajectory-pool seed's DataPool as the seed describes it, for the
same-run baseline of ``pool_bench.py``: a Python Ray actor with dict
indices (``trajectory_index``, ``trajectory_complete``, ``prompt_groups``),
``submit_step`` / ``submit_steps`` / ``complete_trajectory`` /
``fetch_batch`` (FIFO over ready groups, ``None`` when none is ready),
``max_queue_size`` and the lazy compaction at half consumed.

Written for the benchmark from the seed's description (no code of it was
given); a step is a dict of the seed's ``Step`` fields.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional


class DataPool:
    def __init__(self, group_size: int, max_queue_size: Optional[int] = None):
        self.group_size = group_size
        self.max_queue_size = max_queue_size
        self.steps: List[Optional[dict]] = []
        self.trajectory_index: Dict[str, List[int]] = {}
        self.trajectory_complete: Dict[str, bool] = {}
        self.prompt_groups: Dict[str, List[str]] = {}
        self.ready: "OrderedDict[str, None]" = OrderedDict()
        self.consumed = 0
        self.dropped = 0

    def submit_step(self, step: dict) -> None:
        uid, prompt = step["trajectory_uid"], step["prompt_uid"]
        if uid not in self.trajectory_index:
            self.trajectory_index[uid] = []
            self.trajectory_complete[uid] = False
            self.prompt_groups.setdefault(prompt, []).append(uid)
        self.trajectory_index[uid].append(len(self.steps))
        self.steps.append(step)
        if step["is_last"]:
            self.complete_trajectory(uid, prompt)

    def submit_steps(self, steps: List[dict]) -> None:
        for s in steps:
            self.submit_step(s)

    def complete_trajectory(self, trajectory_uid: str, prompt_uid: Optional[str] = None) -> None:
        self.trajectory_complete[trajectory_uid] = True
        if prompt_uid is None:
            prompt_uid = next(p for p, ts in self.prompt_groups.items() if trajectory_uid in ts)
        group = self.prompt_groups[prompt_uid]
        if len(group) == self.group_size and all(self.trajectory_complete[t] for t in group):
            self.ready[prompt_uid] = None
            if self.max_queue_size is not None and len(self.ready) > self.max_queue_size:
                oldest, _ = self.ready.popitem(last=False)
                self._take(oldest)
                self.dropped += 1

    def _take(self, prompt_uid: str) -> List[dict]:
        out = []
        for uid in self.prompt_groups.pop(prompt_uid):
            for i in self.trajectory_index.pop(uid):
                out.append(self.steps[i])
                self.steps[i] = None
            del self.trajectory_complete[uid]
        self.consumed += len(out)
        if self.consumed * 2 > len(self.steps):
            self._compact()
        return out

    def _compact(self) -> None:
        remap, kept = {}, []
        for i, s in enumerate(self.steps):
            if s is not None:
                remap[i] = len(kept)
                kept.append(s)
        self.steps = kept
        for uid, idx in self.trajectory_index.items():
            self.trajectory_index[uid] = [remap[i] for i in idx]
        self.consumed = 0

    def fetch_batch(self) -> Optional[List[dict]]:
        if not self.ready:
            return None
        prompt_uid, _ = self.ready.popitem(last=False)
        return self._take(prompt_uid)

    def pid(self) -> int:
        import os

        return os.getpid()


class NoopPool:
    """Takes steps and drops them: the gateways' own ceiling."""

    def submit_steps(self, steps) -> None:
        return None

    def pid(self) -> int:
        import os

        return os.getpid()
