"""Type stub of the compiled half of seed_rs (``seed_rs._native``).

The docstrings live on the compiled objects (``help(seed_rs.ReplayClient)``);
this file gives their signatures to type checkers and editors.
"""

from os import PathLike
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "PathLike[str]"]
#: ``(fields, keys, weights)``: ``{field: array [B, *field_shape]}``,
#: ``uint64 [B]``, ``float32 [B]``.
SampledBatch = Tuple[Dict[str, np.ndarray], npt.NDArray[np.uint64], npt.NDArray[np.float32]]

class ActorError(RuntimeError): ...

class ReplayError(RuntimeError):
    #: The gRPC status name (``"INVALID_ARGUMENT"``, ...), or ``None`` when
    #: no status came back.
    code: Optional[str]
    #: The server's message (it names the field at fault).
    message: str

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
    def insert(
        self,
        table: str,
        fields: Mapping[str, np.ndarray],
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
    def info(self, table: Optional[str] = None) -> Dict[str, Any]: ...
    def checkpoint(self, table: str) -> Dict[str, Any]: ...

class SampleStream(Iterator[SampledBatch]):
    def __iter__(self) -> SampleStream: ...
    def __next__(self) -> SampledBatch: ...
    def close(self) -> None: ...

