"""Type stub of the compiled half of seed_rs (``seed_rs._native``).

The docstrings live on the compiled objects (``help(seed_rs.ReplayClient)``);
this file gives their signatures to type checkers and editors.
"""

from os import PathLike
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "PathLike[str]"]
#: A variable-length field (shape ``[..., -1]``) as it comes back:
#: ``(values, offsets)``, ``values`` the rows' values one after another (a
#: read-only 1-D array; writable only when it had to be copied),
#: ``offsets`` ``int64 [rows + 1]`` from 0. ``seed_rs.pad`` pads it.
VariableField = Tuple[np.ndarray, npt.NDArray[np.int64]]
#: A field as sampled, followed or fetched: an array ``[rows, *field_shape]``,
#: or a variable-length field's ``(values, offsets)``.
_Field = Union[np.ndarray, VariableField]
#: ``(fields, keys, weights)``: ``{field: array [B, *field_shape]}`` (a
#: variable-length field ``(values, offsets)``), ``uint64 [B]``,
#: ``float32 [B]``.
SampledBatch = Tuple[Dict[str, _Field], npt.NDArray[np.uint64], npt.NDArray[np.float32]]
#: What ``follow`` yields: ``{"keys", "fields", "policy_versions",
#: "next_key", "head_key", "replaced"}`` (``fields`` as in a sampled batch,
#: a variable-length field ``(values, offsets)``), or ``{"gap": (requested,
#: oldest)}``.
FollowEvent = Dict[str, Any]

class ActorError(RuntimeError): ...

class ReplayError(RuntimeError):
    #: The gRPC status name (``"INVALID_ARGUMENT"``, ...), or ``None`` when
    #: no status came back.
    code: Optional[str]
    #: The server's message (it names the field at fault).
    message: str

class ReplayArgumentError(ReplayError, ValueError):
    """A table refused bad input (status ``INVALID_ARGUMENT``)."""

#: What ``ReplayBuffer`` and ``ReplayTable`` take as arrays: numpy arrays,
#: or anything with ``__dlpack__`` or the buffer protocol.
_Array = Any
#: What ``insert`` takes for a field: an array ``[rows, *field_shape]``; for
#: a variable-length field a list of one array per row, or ``(values,
#: offsets)``.
_FieldIn = Union[_Array, Sequence[_Array], Tuple[_Array, npt.ArrayLike]]
#: A table object of a replay server's config file (a dict), its JSON
#: text, a whole config file as a dict, or a config file's path.
_TableConfig = Union[Mapping[str, Any], str, "PathLike[str]"]
#: A fetched group: ``group_id``, ``trajectory_ids``, ``lengths``,
#: ``fields`` (``{field: array [steps, *shape]}``; a variable-length field
#: ``(values, offsets)``), ``policy_versions``, ``lags``, ``policy_version``,
#: ``metadata``.
Group = Dict[str, Any]
#: A trajectory or group id: an integer, or a string for a table with
#: ``str`` ids.
_Id = Union[int, str]

class NativeActor:
    def __init__(
        self,
        envs: Sequence[Any],
        spec: Mapping[str, Any],
        *,
        learner: str,
        token: Optional[str] = None,
        actor_id: Optional[str] = None,
        seed: Optional[int] = None,
        tls_ca: Optional[_Path] = None,
        tls_domain: Optional[str] = None,
        tls_cert: Optional[_Path] = None,
        tls_key: Optional[_Path] = None,
        max_reconnects: Optional[int] = None,
    ) -> None: ...
    @property
    def actor_id(self) -> str: ...
    @property
    def seed(self) -> int: ...
    def run(self, max_steps: Optional[int] = None, max_seconds: Optional[float] = None) -> Dict[str, Any]: ...

def check_spec(spec: Mapping[str, Any]) -> None: ...
def enable_logging(filter: Optional[str] = None, json: bool = False) -> bool: ...
def call_floor(floats: int) -> npt.NDArray[np.float32]: ...
def run_program(
    name: str, argv: Sequence[str], self_command: Optional[Tuple[str, Sequence[str]]] = None
) -> int:
    """Runs ``learner``, ``replay-server`` or ``actor`` in this process; its exit code."""

#: Every method of a replay table (``ReplayBuffer``, ``ReplayTable``), in
#: the order of the list they are generated from.
TABLE_METHODS: Tuple[str, ...]
#: The table methods ``ReplayClient`` has with the table's name first.
CLIENT_TABLE_METHODS: Tuple[str, ...]
#: The learner's default address (``seed_rs.defaults.LEARNER_ADDR``).
DEFAULT_LEARNER_ADDR: str
#: The Rust actor's default env count (``seed_rs.defaults.NUM_ENVS``).
DEFAULT_NUM_ENVS: int
#: `--eval-every`'s episode seeds start here (episode i: EVAL_SEED + i).
EVAL_SEED: int
#: The best policy's directory in a run directory.
BEST_DIR: str
#: Episodes per evaluation (`--eval-episodes`).
DEFAULT_EVAL_EPISODES: int

class NativePolicy:
    """A checkpoint's policy (use `seed_rs.Policy`, which takes env observations)."""

    def __init__(self, path: str) -> None: ...
    def info(self) -> Dict[str, Any]: ...
    def seed(self, seed: int) -> None: ...
    def forward(
        self,
        obs: npt.NDArray[Any],
        h: Optional[npt.NDArray[np.float32]] = None,
        c: Optional[npt.NDArray[np.float32]] = None,
    ) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], Optional[Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]]: ...
    def act(
        self,
        obs: npt.NDArray[Any],
        greedy: bool,
        h: Optional[npt.NDArray[np.float32]] = None,
        c: Optional[npt.NDArray[np.float32]] = None,
    ) -> Tuple[npt.NDArray[Any], npt.NDArray[np.float32], Optional[Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]]: ...
    def weights(self) -> Dict[str, npt.NDArray[np.float32]]: ...

class TensorBoardWriter:
    """Scalars into a new TensorBoard event file in `dir`."""

    def __init__(self, dir: str) -> None: ...
    @property
    def path(self) -> str: ...
    def scalar(self, tag: str, step: int, value: float) -> None: ...
    def flush(self) -> None: ...

class ReplayClient:
    def __init__(
        self,
        addr: str,
        token: Optional[str] = None,
        *,
        tls_ca: Optional[_Path] = None,
        tls_domain: Optional[str] = None,
        tls_cert: Optional[_Path] = None,
        tls_key: Optional[_Path] = None,
        max_message_bytes: Optional[int] = None,
        connect_timeout: float = 10.0,
    ) -> None: ...
    @property
    def addr(self) -> str: ...
    def table(self, name: str) -> ReplayTable: ...
    def info(self, table: Optional[str] = None) -> Dict[str, Any]: ...
    # CLIENT_TABLE_METHODS: a table's methods with its name first.
    def insert(
        self,
        table: str,
        fields: Mapping[str, _FieldIn],
        priorities: Optional[npt.ArrayLike] = None,
        policy_versions: Optional[npt.ArrayLike] = None,
    ) -> npt.NDArray[np.uint64]: ...
    def sample(self, table: str, batch_size: int, timeout: Optional[float] = None) -> SampledBatch: ...
    def sample_stream(
        self,
        table: str,
        batch_size: int,
        *,
        max_batches: int = 0,
        max_in_flight: int = 0,
        timeout: Optional[float] = None,
    ) -> SampleStream: ...
    def update_priorities(self, table: str, keys: npt.ArrayLike, priorities: npt.ArrayLike) -> Dict[str, int]: ...
    def set_policy_version(self, table: str, version: int) -> None: ...
    def checkpoint(self, table: str) -> Dict[str, Any]: ...
    def submit_steps(
        self,
        table: str,
        trajectory_ids: Union[npt.ArrayLike, Sequence[str]],
        group_ids: Union[npt.ArrayLike, Sequence[str]],
        fields: Mapping[str, _FieldIn],
        policy_versions: Optional[npt.ArrayLike] = None,
        is_last: Optional[npt.ArrayLike] = None,
        metadata: Optional[Sequence[Any]] = None,
        wait: bool = True,
    ) -> Optional[Dict[str, int]]: ...
    def flush_submits(self, table: str) -> Dict[str, int]: ...
    def submit_step(
        self,
        table: str,
        trajectory_id: _Id,
        group_id: _Id,
        step: Mapping[str, Any],
        policy_version: int = 0,
        is_last: bool = False,
        metadata: Any = None,
    ) -> Dict[str, int]: ...
    def complete_trajectory(self, table: str, trajectory_id: _Id) -> bool: ...
    def fetch_group(self, table: str, timeout: Optional[float] = None) -> Optional[Group]: ...
    def fetch_batch(self, table: str, timeout: Optional[float] = None) -> Optional[Group]: ...
    def follow(self, table: str, cursor: int = 0, *, max_batch: int = 0, max_in_flight: int = 0) -> FollowStream: ...

class _TableMethods:
    """The methods ``ReplayBuffer`` and ``ReplayTable`` share (``TABLE_METHODS``;
    ``sample_stream`` and ``follow`` are on each class, with its stream type)."""

    @property
    def name(self) -> str: ...
    def insert(
        self,
        fields: Mapping[str, _FieldIn],
        priorities: Optional[npt.ArrayLike] = None,
        policy_versions: Optional[npt.ArrayLike] = None,
    ) -> npt.NDArray[np.uint64]: ...
    def sample(self, batch_size: int, timeout: Optional[float] = None) -> SampledBatch: ...
    def update_priorities(self, keys: npt.ArrayLike, priorities: npt.ArrayLike) -> Dict[str, int]: ...
    def set_policy_version(self, version: int) -> None: ...
    def info(self) -> Dict[str, Any]: ...
    def checkpoint(self) -> Dict[str, Any]: ...
    def submit_steps(
        self,
        trajectory_ids: Union[npt.ArrayLike, Sequence[str]],
        group_ids: Union[npt.ArrayLike, Sequence[str]],
        fields: Mapping[str, _FieldIn],
        policy_versions: Optional[npt.ArrayLike] = None,
        is_last: Optional[npt.ArrayLike] = None,
        metadata: Optional[Sequence[Any]] = None,
        wait: bool = True,
    ) -> Optional[Dict[str, int]]: ...
    def flush_submits(self) -> Dict[str, int]: ...
    def submit_step(
        self,
        trajectory_id: _Id,
        group_id: _Id,
        step: Mapping[str, Any],
        policy_version: int = 0,
        is_last: bool = False,
        metadata: Any = None,
    ) -> Dict[str, int]: ...
    def complete_trajectory(self, trajectory_id: _Id) -> bool: ...
    def fetch_group(self, timeout: Optional[float] = None) -> Optional[Group]: ...
    def fetch_batch(self, timeout: Optional[float] = None) -> Optional[Group]: ...
    def close(self) -> None: ...

class ReplayBuffer(_TableMethods):
    def __init__(
        self,
        table: _TableConfig,
        *,
        name: Optional[str] = None,
        checkpoint_dir: Optional[_Path] = None,
    ) -> None: ...
    @classmethod
    def restore(
        cls,
        table: _TableConfig,
        *,
        name: Optional[str] = None,
        checkpoint_dir: Optional[_Path] = None,
    ) -> ReplayBuffer: ...
    def sample_stream(
        self,
        batch_size: int,
        *,
        max_batches: int = 0,
        max_in_flight: int = 0,
        timeout: Optional[float] = None,
    ) -> LocalSampleStream: ...
    def follow(self, cursor: int = 0, *, max_batch: int = 0, max_in_flight: int = 0) -> LocalFollowStream: ...
    def __enter__(self) -> ReplayBuffer: ...
    def __exit__(self, *args: Any) -> bool: ...

class ReplayTable(_TableMethods):
    def __init__(self, client: ReplayClient, name: str) -> None: ...
    def sample_stream(
        self,
        batch_size: int,
        *,
        max_batches: int = 0,
        max_in_flight: int = 0,
        timeout: Optional[float] = None,
    ) -> SampleStream: ...
    def follow(self, cursor: int = 0, *, max_batch: int = 0, max_in_flight: int = 0) -> FollowStream: ...
    def __enter__(self) -> ReplayTable: ...
    def __exit__(self, *args: Any) -> bool: ...

class LocalSampleStream(Iterator[SampledBatch]):
    def __iter__(self) -> LocalSampleStream: ...
    def __next__(self) -> SampledBatch: ...
    def close(self) -> None: ...

class LocalFollowStream(Iterator[FollowEvent]):
    def __iter__(self) -> LocalFollowStream: ...
    def __next__(self) -> FollowEvent: ...
    def close(self) -> None: ...

class FollowStream(Iterator[FollowEvent]):
    def __iter__(self) -> FollowStream: ...
    def __next__(self) -> FollowEvent: ...
    def close(self) -> None: ...

class SampleStream(Iterator[SampledBatch]):
    def __iter__(self) -> SampleStream: ...
    def __next__(self) -> SampledBatch: ...
    def close(self) -> None: ...

