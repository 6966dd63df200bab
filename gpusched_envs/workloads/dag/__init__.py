"""DAG workloads: the :class:`DAG` record, generators, loaders, specs."""

from .alibaba2018 import load_alibaba2018, load_alibaba2018_job, parse_task_name, read_batch_task
from .alibaba_like import alibaba_like_dag
from .gpt2 import gpt2_dag
from .model import DAG, DAGError
from .pipedream import layer_graph, pipedream_dag, pipedream_models
from .random_layered import random_layered_dag
from .spec import dag_spec_kinds, load_dag
from .tpch import tpch_dag

__all__ = [
    "DAG",
    "DAGError",
    "alibaba_like_dag",
    "dag_spec_kinds",
    "gpt2_dag",
    "layer_graph",
    "load_alibaba2018",
    "load_alibaba2018_job",
    "load_dag",
    "parse_task_name",
    "pipedream_dag",
    "pipedream_models",
    "random_layered_dag",
    "read_batch_task",
    "tpch_dag",
]
