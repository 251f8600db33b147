"""Profiler: records runtime behaviour of the first calls (``sys.settrace``)."""

from janus.profiler.observe import ObjectObs, Observation, ScalarObs, SeqObs, TensorObs, observe
from janus.profiler.profile import CallRecord, Profile
from janus.profiler.tracer import profiled_call

__all__ = [
    "CallRecord",
    "ObjectObs",
    "Observation",
    "Profile",
    "ScalarObs",
    "SeqObs",
    "TensorObs",
    "observe",
    "profiled_call",
]
