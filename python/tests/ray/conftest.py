"""A real multi-node Ray cluster on this machine (Ray's own test cluster,
``ray.cluster_utils.Cluster``), CPU only: a head node for the driver, two
learner nodes (resource ``learner``: the learner runs on one, and comes
back on the other when its node is removed) and two actor nodes (resource
``actor``).

Run inside a network namespace that holds only loopback, with every node
on 127.0.0.1 (what these machines allow): ``.ci/run`` does::

    unshare --net sh -c 'ip link set lo up && RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 pytest python/tests/ray'

The fixtures check both (every node's address is 127.0.0.1).
"""

from __future__ import annotations

import os

import pytest
import ray
from ray.cluster_utils import Cluster

NODE_IP = "127.0.0.1"


def _node(resources: dict, cpus: int = 2) -> dict:
    return {"num_cpus": cpus, "resources": resources, "node_ip_address": NODE_IP,
            "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster():
    """The cluster. Yields ``(cluster, {"learners": [node, node], "actors":
    [node, node]})`` (Ray's node objects, for ``remove_node``)."""
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0", (
        "run inside the loopback namespace with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (see conftest)")
    c = Cluster(initialize_head=True, head_node_args=_node({}, cpus=1))
    nodes = {"learners": [c.add_node(**_node({"learner": 1})) for _ in range(2)],
             "actors": [c.add_node(**_node({"actor": 8}, cpus=4)) for _ in range(2)]}
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        alive = [n for n in ray.nodes() if n["Alive"]]
        assert len(alive) == 5
        assert {n["NodeManagerAddress"] for n in alive} == {NODE_IP}
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()
